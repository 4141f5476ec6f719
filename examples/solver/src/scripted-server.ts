// A stand-in for an LLM server, so the example runs where none is at hand: the project's own
// OpenAI-compatible test server (@flowgrpo/agent/testing), answering each structured request from
// the JSON schema it carries. The script plays the seed's run in two steps: calculator on 12^2,
// then Wikipedia on the year, then stop. Its replies are canned text, not reasoning.
import { OpenAITestServer, reply, schemaResponder } from '@flowgrpo/agent/testing';

export async function scriptedServer(): Promise<OpenAITestServer> {
  const server = await OpenAITestServer.start({ model: 'test-model' });
  const responder = schemaResponder({
    tools: ['calculator', 'Wikipedia_RAG_Search_Tool'],
    values: { expression: '12^2', query: 'major historical events of the year 144 AD' },
    stopAtVerification: 2,
    answer: '(scripted reply of the test server) 12 squared is 144.\nAnswer: 144 AD',
  });
  server.setFallback('chat', reply.text(responder));
  return server;
}
