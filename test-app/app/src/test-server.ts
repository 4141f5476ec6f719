// A stand-in for the LLM server while developing or testing the app: @flowgrpo/agent/testing's
// OpenAI-compatible server on 127.0.0.1. It answers each structured request of the solver from
// the JSON schema the request carries; the script makes the planner pick the calculator with
// "12^2" and the verifier stop after that step. Prints its base URL, then serves until stopped.
import { OpenAITestServer, reply, schemaResponder } from '@flowgrpo/agent/testing';

const server = await OpenAITestServer.start({ model: 'test-model' });
const responder = schemaResponder({
  tools: ['calculator'],
  values: { expression: '12^2' },
  stopAtVerification: 1,
  answer: 'Squared 12.\nAnswer: 144',
});
server.setFallback('chat', reply.text(responder));
console.log(server.baseURL);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
