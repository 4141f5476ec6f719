import { z } from 'zod';
import { badRequest } from './errors.js';

// The request bodies the gateway accepts, as OpenAI's API (and vLLM's extensions) define them.
// Unknown fields pass through untouched — SDKs send many (`user`, `store`, `parallel_tool_calls`,
// …) — but a field that would change the sampled distribution in a way the gateway cannot
// reproduce exactly (penalties, logit bias, n > 1) is refused: the recorded logprobs must be the
// ones the policy sampled with.

const textPart = z.looseObject({ type: z.literal('text'), text: z.string() });
const content = z.union([z.string(), z.null(), z.array(textPart)]);

const toolCall = z.looseObject({
  id: z.string().optional(),
  type: z.literal('function').optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});

const message = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('developer'), content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('user'), content, name: z.string().optional() }),
  z.looseObject({
    role: z.literal('assistant'),
    content: content.optional(),
    tool_calls: z.array(toolCall).nullish(),
    reasoning_content: z.string().nullish(),
    name: z.string().optional(),
  }),
  z.looseObject({ role: z.literal('tool'), content, tool_call_id: z.string().optional() }),
]);
export type WireMessage = z.infer<typeof message>;

const tool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});
export type WireTool = z.infer<typeof tool>;

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.object({ name: z.string() }) }),
]);
export type WireToolChoice = z.infer<typeof toolChoice>;

const stop = z.union([z.string(), z.array(z.string()).max(16)]).nullish();
const zeroOnly = (name: string) =>
  z
    .number()
    .nullish()
    .refine((v) => v === undefined || v === null || v === 0, {
      message: `${name} is not supported: the gateway samples from the policy's own distribution so that the recorded logprobs are the trained ones`,
    });

const sampling = {
  model: z.string().min(1),
  max_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  n: z
    .number()
    .int()
    .nullish()
    .refine((v) => v === undefined || v === null || v === 1, {
      message: 'n must be 1 (send one request per sample)',
    }),
  stop,
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  presence_penalty: zeroOnly('presence_penalty'),
  frequency_penalty: zeroOnly('frequency_penalty'),
  repetition_penalty: z
    .number()
    .nullish()
    .refine((v) => v === undefined || v === null || v === 1, {
      message: 'repetition_penalty is not supported',
    }),
  logit_bias: z
    .record(z.string(), z.number())
    .nullish()
    .refine((v) => !v || Object.keys(v).length === 0, { message: 'logit_bias is not supported' }),
  /** OpenAI's metadata (string map); `rollout_id` groups the call into a rollout. */
  metadata: z.record(z.string(), z.unknown()).nullish(),
  /** vLLM: logprob tokens as "token_id:<id>". */
  return_tokens_as_token_ids: z.boolean().nullish(),
  /** vLLM ≥ 0.10.2: prompt_token_ids and the choice's token_ids in the response. */
  return_token_ids: z.boolean().nullish(),
};

export const ChatCompletionRequestSchema = z.looseObject({
  ...sampling,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().positive().nullish(),
  tools: z.array(tool).nullish(),
  tool_choice: toolChoice.nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  /** vLLM/transformers: extra variables for the chat template (e.g. enable_thinking). */
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

export const CompletionRequestSchema = z.looseObject({
  ...sampling,
  prompt: z.union([
    z.string(),
    z.array(z.string()).length(1),
    z.array(z.number().int().nonnegative()).min(1),
    z.array(z.array(z.number().int().nonnegative()).min(1)).length(1),
  ]),
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z
    .boolean()
    .nullish()
    .refine((v) => !v, { message: 'echo is not supported' }),
  suffix: z
    .string()
    .nullish()
    .refine((v) => !v, { message: 'suffix is not supported' }),
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

export const LoadLoraRequestSchema = z.looseObject({
  lora_name: z.string().min(1),
  lora_path: z.string().min(1),
  load_inplace: z.boolean().nullish(),
});
export const UnloadLoraRequestSchema = z.looseObject({ lora_name: z.string().min(1) });

export const RewardRequestSchema = z.looseObject({
  reward: z.number().refine(Number.isFinite, { message: 'reward must be a finite number' }),
  /** The agent's final answer, when the trainer should see it. */
  final_answer: z.string().optional(),
  /** The GRPO group (the task) this rollout belongs to, for training from posted rewards. */
  group_id: z.string().min(1).max(200).optional(),
  /** Per-role rewards (multi-role training); roles left out get `reward`. */
  role_rewards: z.record(z.string(), z.number()).optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** Parses a body with a schema; the first issue becomes a 400 naming the field (`param`). */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badRequest('the request body must be a JSON object', null, 'invalid_body');
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = issue.path.map(String).join('.');
  let at: unknown = body;
  for (const k of issue.path) at = (at as Record<PropertyKey, unknown> | undefined)?.[k];
  const missing = at === undefined && issue.path.length > 0;
  throw badRequest(
    missing ? `'${path}' is a required property` : `${path ? `${path}: ` : ''}${issue.message}`,
    path || null,
    missing ? 'missing_required_parameter' : 'invalid_value',
  );
}

/** A message's content as text (text parts joined); null/absent → ''. */
export function contentText(c: z.infer<typeof content> | undefined): string {
  if (c === null || c === undefined) return '';
  if (typeof c === 'string') return c;
  return c.map((p) => p.text).join('');
}
