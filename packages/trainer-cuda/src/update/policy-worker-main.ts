import { parentPort } from 'node:worker_threads';
import { LoraPolicy } from './lora-policy.js';
import {
  fromWire,
  mapRecord,
  type OpenedPolicy,
  type PolicyCall,
  type PolicyReply,
  stateToWire,
  type UpdatedPolicy,
} from './policy-worker-protocol.js';

// The thread of a WorkerLoraPolicy (policy-worker.ts): one LoraPolicy, its calls answered in
// order. ONNX Runtime's run blocks the thread it runs on; here that is this one, not the thread
// whose agents sample the next batch.

const port = parentPort!;
let policy: LoraPolicy | undefined;

async function answer(call: PolicyCall): Promise<unknown> {
  if (call.op === 'open') {
    const { state, ...options } = call.options;
    policy = await LoraPolicy.open({
      ...options,
      ...(state && {
        state: {
          step: state.step,
          m: mapRecord(state.m, fromWire),
          v: mapRecord(state.v, fromWire),
        },
      }),
    });
    const opened: OpenedPolicy = {
      config: policy.config,
      lora: policy.lora,
      paramSpecs: policy.paramSpecs.map((s) => ({ name: s.name, shape: [...s.shape] })),
      device: policy.device,
      step: policy.step,
      params: policy.params,
    };
    return opened;
  }
  if (!policy) throw new Error('the policy is not open');
  switch (call.op) {
    case 'logprobs':
      return policy.logprobs(call.rows, call.targets, call.options);
    case 'update': {
      const result = await policy.update(call.rows, call.targets, call.inputs, call.hp);
      const updated: UpdatedPolicy = { result, params: policy.params, step: policy.step };
      return updated;
    }
    case 'exportState':
      return stateToWire(await policy.exportState());
    case 'release':
      await policy.release();
      policy = undefined;
      return undefined;
  }
}

// One call at a time, in the order sent: a LoraPolicy is not re-entrant.
let queue: Promise<void> = Promise.resolve();
port.on('message', (msg: { id: number; call: PolicyCall }) => {
  queue = queue.then(() => serve(msg));
});

async function serve({ id, call }: { id: number; call: PolicyCall }): Promise<void> {
  let reply: PolicyReply;
  try {
    reply = { id, ok: true, value: await answer(call) };
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    const hint = (err as { hint?: string }).hint;
    reply = {
      id,
      ok: false,
      error: {
        name: err.name,
        message: err.message,
        ...(hint && { hint }),
        ...(err.stack && { stack: err.stack }),
      },
    };
  }
  port.postMessage(reply);
}
