// A model call that fails (here: nothing listens at the base URL) makes the agent throw, so the
// trainer records a failed rollout. The AI SDK's textStream leaves errors out; before the agent
// kept them, this run returned an empty answer, scored like any other (seen in CI: ECONNRESET).
import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { runAlmanacAgent } from '../src/agent.js';

/** A port nothing listens on: one the OS gave a server that is closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

it('throws when its model call fails, instead of answering empty', async () => {
  const port = await closedPort();
  await expect(
    runAlmanacAgent({
      baseURL: `http://127.0.0.1:${port}/v1`,
      model: 'policy',
      question: 'In which year was the Old Mill built?',
      lookup: () => undefined,
    }),
  ).rejects.toThrow(/Cannot connect to API|ECONNREFUSED/);
});
