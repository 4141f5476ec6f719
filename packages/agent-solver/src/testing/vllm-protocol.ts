// vLLM's OpenAI-server wire schema (and SGLang's LoRA routes) as data: the request fields vLLM
// knows with the types its pydantic models validate, and the response models a client written for
// vLLM parses. Written from vLLM's source, not copied from it:
//
// - vllm-project/vllm @ 002032ee2b18e1f7bd924ec47b62504ba3866063 (main, after the v0.1x
//   `entrypoints/openai/<api>/protocol.py` split):
//   vllm/entrypoints/openai/completion/protocol.py (CompletionRequest, CompletionLogProbs,
//   CompletionResponse(Choice), CompletionStreamResponse) and
//   vllm/entrypoints/openai/chat_completion/protocol.py (ChatCompletionRequest, ChatMessage,
//   ChatCompletionLogProbs(Content), ChatCompletionResponse(Choice), ChatCompletionStreamResponse).
// - vllm/entrypoints/serve/engine/protocol.py @ f1bf7bd07a112d72d905d355a8206b8d1e82cb5d
//   (OpenAIBaseModel, ErrorResponse, ModelCard, ModelList, UsageInfo).
// - vllm/entrypoints/serve/lora/protocol.py @ 7fd1b43852e1c71c7cde24ab80ccbe46c2c68a18 and
//   api_router.py @ 27873cab97e41ef32a6a8bcf83fa475a23e6e921 (LoadLoRAAdapterRequest,
//   UnloadLoRAAdapterRequest, the /v1/(un)load_lora_adapter routes, only registered when
//   VLLM_ALLOW_RUNTIME_LORA_UPDATING is set); vllm/entrypoints/openai/models/serving.py
//   @ 00153c8b7948077ebdfc5bfa14e403da41aaea6d (what they answer: 200 with the plain text
//   "Success: LoRA adapter '<name>' added successfully.", 400 when the name is already loaded
//   without load_inplace, 404 when unloading an unknown name).
// - `return_token_ids` came with vLLM PR #22587, first released in v0.10.2; older servers log and
//   drop the field (see below), so the reply simply lacks prompt_token_ids/token_ids.
// - sgl-project/sglang: python/sglang/srt/entrypoints/http_server.py
//   @ 0025436eab0556737d615b36a4dd3e1e26e82f3d (POST /load_lora_adapter and /unload_lora_adapter
//   at the server root, body LoadLoRAAdapterReqInput {lora_name, lora_path, pinned, lora_id} /
//   UnloadLoRAAdapterReqInput {lora_name, lora_id}, answered 200 or 400 with a JSON
//   LoRAUpdateOutput {success, error_message, …}); serving_completions.py
//   @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a (the adapter of a generation is
//   `_resolve_lora_path(request.model, request.lora_path)`: "base:adapter" in `model`, or the
//   request's `lora_path` field holding the adapter's name; a plain `model` runs the base model).
//
// What vLLM does with a request body: every request model derives from OpenAIBaseModel, which is
// `ConfigDict(extra="allow")` plus a wrap validator that *logs and ignores* unknown fields (a
// warning, later a debug line) — an unknown field is never a 400, it is silently dropped. Known
// fields are validated by pydantic v2 in lax mode: a wrong type is a 400 (vLLM turns FastAPI's
// RequestValidationError into a 400 ErrorResponse). Lax mode coerces: an int field takes a whole
// float, a numeric string or a bool; a bool field takes 0/1 and "true"/"false"-like strings; a
// str field takes only strings. On top, `mode="before"` validators check what pydantic cannot
// (e.g. `logprobs` must be a number, a non-empty prompt). The LoRA bodies are plain pydantic
// BaseModels (extra="ignore"): unknown fields are dropped without a log.
//
// `checkVllmRequest` does all that and also returns the ignored fields, so a test can treat an
// ignored field as the bug it is for a client (the intent was silently lost).

export type WireType =
  | 'str'
  | 'int'
  | 'float'
  | 'bool'
  | 'int[]'
  | 'str[]'
  | 'dict'
  | 'stop'
  | 'prompt'
  | 'messages'
  | 'any';

/** A field: its type, `?` = may be absent or null (pydantic `X | None` with a default). */
export type FieldSpec = `${WireType}` | `${WireType}?`;

/** CompletionRequest (vllm/entrypoints/openai/completion/protocol.py): every field's name. */
export const VLLM_COMPLETION_REQUEST: Record<string, FieldSpec> = {
  model: 'str?',
  prompt: 'prompt?',
  echo: 'bool?',
  frequency_penalty: 'float?',
  logit_bias: 'dict?',
  logprobs: 'int?',
  max_tokens: 'int?',
  n: 'int',
  presence_penalty: 'float?',
  seed: 'int?',
  stop: 'stop?',
  stream: 'bool?',
  stream_options: 'dict?',
  suffix: 'str?',
  temperature: 'float?',
  top_p: 'float?',
  user: 'str?',
  use_beam_search: 'bool',
  top_k: 'int?',
  min_p: 'float?',
  repetition_penalty: 'float?',
  watermarking: 'bool?',
  length_penalty: 'float',
  stop_token_ids: 'int[]?',
  include_stop_str_in_output: 'bool',
  ignore_eos: 'bool',
  min_tokens: 'int',
  skip_special_tokens: 'bool',
  spaces_between_special_tokens: 'bool',
  truncate_prompt_tokens: 'int?',
  truncation_side: 'str?',
  allowed_token_ids: 'int[]?',
  prompt_logprobs: 'int?',
  logprob_token_ids: 'int[]?',
  bad_words: 'str[]',
  prompt_embeds: 'any?',
  add_special_tokens: 'bool',
  response_format: 'dict?',
  structured_outputs: 'dict?',
  priority: 'int',
  request_id: 'str',
  session_id: 'str?',
  return_tokens_as_token_ids: 'bool?',
  return_token_ids: 'bool?',
  routed_experts_prompt_start: 'int',
  return_token_offsets: 'bool?',
  return_mm_kwargs: 'bool',
  cache_salt: 'str?',
  kv_transfer_params: 'dict?',
  ec_transfer_params: 'dict?',
  vllm_xargs: 'dict?',
  repetition_detection: 'dict?',
  thinking_token_budget: 'int?',
  stream_interval: 'int?',
};

/** ChatCompletionRequest (vllm/entrypoints/openai/chat_completion/protocol.py). */
export const VLLM_CHAT_REQUEST: Record<string, FieldSpec> = {
  messages: 'messages',
  model: 'str?',
  frequency_penalty: 'float?',
  logit_bias: 'dict?',
  logprobs: 'bool?',
  top_logprobs: 'int?',
  max_tokens: 'int?',
  max_completion_tokens: 'int?',
  n: 'int?',
  presence_penalty: 'float?',
  response_format: 'dict?',
  seed: 'int?',
  stop: 'stop?',
  stream: 'bool?',
  stream_options: 'dict?',
  temperature: 'float?',
  top_p: 'float?',
  tools: 'any?',
  tool_choice: 'any?',
  reasoning_effort: 'str?',
  thinking_token_budget: 'int?',
  include_reasoning: 'bool',
  parallel_tool_calls: 'bool?',
  user: 'str?',
  use_beam_search: 'bool',
  top_k: 'int?',
  min_p: 'float?',
  repetition_penalty: 'float?',
  watermarking: 'bool?',
  length_penalty: 'float',
  stop_token_ids: 'int[]?',
  include_stop_str_in_output: 'bool',
  ignore_eos: 'bool',
  min_tokens: 'int',
  skip_special_tokens: 'bool',
  spaces_between_special_tokens: 'bool',
  truncate_prompt_tokens: 'int?',
  truncation_side: 'str?',
  prompt_logprobs: 'int?',
  logprob_token_ids: 'int[]?',
  allowed_token_ids: 'int[]?',
  bad_words: 'str[]',
  echo: 'bool',
  add_generation_prompt: 'bool',
  continue_final_message: 'bool',
  add_special_tokens: 'bool',
  documents: 'any?',
  chat_template: 'str?',
  chat_template_kwargs: 'dict?',
  media_io_kwargs: 'dict?',
  mm_processor_kwargs: 'dict?',
  structured_outputs: 'dict?',
  priority: 'int',
  request_id: 'str',
  session_id: 'str?',
  return_tokens_as_token_ids: 'bool?',
  return_token_ids: 'bool?',
  routed_experts_prompt_start: 'int',
  return_token_offsets: 'bool?',
  return_prompt_text: 'bool?',
  return_mm_kwargs: 'bool',
  cache_salt: 'str?',
  kv_transfer_params: 'dict?',
  ec_transfer_params: 'dict?',
  vllm_xargs: 'dict?',
  repetition_detection: 'dict?',
  stream_interval: 'int?',
};

/** LoadLoRAAdapterRequest / UnloadLoRAAdapterRequest (vllm/entrypoints/serve/lora/protocol.py). */
export const VLLM_LOAD_LORA: Record<string, FieldSpec> = {
  lora_name: 'str',
  lora_path: 'str',
  // Newer vLLM only; older ones drop it (plain BaseModel) and then refuse an already-loaded name.
  load_inplace: 'bool',
};
export const VLLM_UNLOAD_LORA: Record<string, FieldSpec> = {
  lora_name: 'str',
  lora_int_id: 'int?',
};

/** SGLang's LoadLoRAAdapterReqInput / UnloadLoRAAdapterReqInput (managers/io_struct.py). */
export const SGLANG_LOAD_LORA: Record<string, FieldSpec> = {
  lora_name: 'str',
  lora_path: 'str',
  pinned: 'bool',
  lora_id: 'str?',
};
export const SGLANG_UNLOAD_LORA: Record<string, FieldSpec> = { lora_name: 'str', lora_id: 'str?' };

/** Fields without a default in the pydantic model: absent → 422→400 "Field required". */
const REQUIRED: Record<string, readonly string[]> = {
  completion: [],
  chat: ['messages'],
  load: ['lora_name', 'lora_path'],
  unload: ['lora_name'],
};

export interface RequestCheck {
  /** The 400 vLLM would answer with, or undefined when it accepts the body. */
  error?: { param: string; message: string };
  /** Fields vLLM logs as "present in the request but ignored". */
  ignored: string[];
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** pydantic v2 lax `int`: an integer, a whole float, a bool, or a string of an integer. */
function laxInt(v: unknown): boolean {
  if (typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isInteger(v);
  return typeof v === 'string' && /^\s*[-+]?\d+\s*$/.test(v);
}
function laxFloat(v: unknown): boolean {
  if (typeof v === 'boolean' || typeof v === 'number') return true;
  return typeof v === 'string' && v.trim() !== '' && !Number.isNaN(Number(v));
}
const BOOL_STRINGS = new Set([
  '0',
  '1',
  'true',
  'false',
  'yes',
  'no',
  'on',
  'off',
  't',
  'f',
  'y',
  'n',
]);
function laxBool(v: unknown): boolean {
  if (typeof v === 'boolean') return true;
  if (typeof v === 'number') return v === 0 || v === 1;
  return typeof v === 'string' && BOOL_STRINGS.has(v.toLowerCase());
}
const nonNegInts = (v: unknown) =>
  Array.isArray(v) && v.every((x) => laxInt(x) && typeof x !== 'boolean' && Number(x) >= 0);

function typeOk(t: WireType, v: unknown): boolean {
  switch (t) {
    case 'str':
      return typeof v === 'string';
    case 'int':
      return laxInt(v);
    case 'float':
      return laxFloat(v);
    case 'bool':
      return laxBool(v);
    case 'int[]':
      return Array.isArray(v) && v.every(laxInt);
    case 'str[]':
      return Array.isArray(v) && v.every((x) => typeof x === 'string');
    case 'dict':
      return isObj(v);
    case 'stop':
      return typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
    case 'prompt':
      // list[int>=0] | list[list[int>=0]] | str | list[str]
      return (
        typeof v === 'string' ||
        (Array.isArray(v) &&
          (v.every((x) => typeof x === 'string') || nonNegInts(v) || v.every(nonNegInts)))
      );
    case 'messages':
      return Array.isArray(v) && v.every((m) => isObj(m) && typeof m.role === 'string');
    case 'any':
      return true;
  }
}

/** What vLLM does with a request body for one of its models (see the header). */
export function checkVllmRequest(
  kind: 'completion' | 'chat' | 'load' | 'unload',
  body: unknown,
  schema: Record<string, FieldSpec> = kind === 'completion'
    ? VLLM_COMPLETION_REQUEST
    : kind === 'chat'
      ? VLLM_CHAT_REQUEST
      : kind === 'load'
        ? VLLM_LOAD_LORA
        : VLLM_UNLOAD_LORA,
): RequestCheck {
  if (!isObj(body))
    return { error: { param: 'body', message: 'Input should be an object' }, ignored: [] };
  const ignored = Object.keys(body).filter((k) => !(k in schema));
  const fail = (param: string, message: string): RequestCheck => ({
    error: { param, message },
    ignored,
  });
  for (const k of REQUIRED[kind] ?? []) if (!(k in body)) return fail(k, 'Field required');
  for (const [k, spec] of Object.entries(schema)) {
    if (!(k in body)) continue;
    const v = body[k];
    const optional = spec.endsWith('?');
    if (v === null) {
      if (!optional) return fail(k, `${k}: Input should not be null`);
      continue;
    }
    const t = (optional ? spec.slice(0, -1) : spec) as WireType;
    if (!typeOk(t, v)) return fail(k, `${k}: Input should be a valid ${t}`);
  }
  // The `mode="before"` validators that bear on what we send.
  if (kind === 'completion' || kind === 'chat') {
    const lpField = kind === 'completion' ? 'logprobs' : 'top_logprobs';
    for (const f of ['prompt_logprobs', lpField]) {
      const v = body[f];
      if (v !== undefined && v !== null && typeof v !== 'number' && typeof v !== 'boolean')
        return fail(f, `\`${f}\` must be an integer.`);
      if (typeof v === 'number' && v < 0 && v !== -1)
        return fail(f, `\`${f}\` must be a positive value or -1.`);
    }
    if (body.stream_options && !body.stream)
      return fail('stream_options', 'Stream options can only be defined when `stream=True`.');
  }
  if (kind === 'completion') {
    const p = body.prompt;
    if ((p === undefined || p === null || p === '') && !body.prompt_embeds)
      return fail('prompt', 'Either prompt or prompt_embeds must be provided and non-empty.');
  }
  if (kind === 'chat') {
    const top = body.top_logprobs;
    if (typeof top === 'number' && (top > 0 || top === -1) && !body.logprobs)
      return fail('top_logprobs', 'when using `top_logprobs`, `logprobs` must be set to true.');
  }
  return { ignored };
}

// ---- Response models: what a client written for vLLM parses. ----

type Shape =
  | WireType
  | { obj: Record<string, ShapeField> }
  | { list: Shape }
  | { literal: string }
  | { map: Shape }
  | { union: Shape[] };
interface ShapeField {
  shape: Shape;
  /** No default in the pydantic model: must be present. */
  required?: boolean;
  /** `X | None`: null accepted. */
  nullable?: boolean;
}
const req = (shape: Shape): ShapeField => ({ shape, required: true });
const opt = (shape: Shape): ShapeField => ({ shape, nullable: true });
const dflt = (shape: Shape): ShapeField => ({ shape });

const Usage: Shape = {
  obj: {
    prompt_tokens: dflt('int'),
    total_tokens: dflt('int'),
    completion_tokens: opt('int'),
    prompt_tokens_details: opt('dict'),
  },
};
const CompletionLogProbs: Shape = {
  obj: {
    text_offset: dflt({ list: 'int' }),
    token_logprobs: dflt({ list: { union: ['float', { literal: 'null' }] } }),
    tokens: dflt({ list: 'str' }),
    top_logprobs: dflt({ list: { union: [{ map: 'float' }, { literal: 'null' }] } }),
  },
};
const completionChoice = (stream: boolean): Shape => ({
  obj: {
    index: req('int'),
    text: req('str'),
    logprobs: opt(CompletionLogProbs),
    finish_reason: opt('str'),
    stop_reason: opt({ union: ['int', 'str'] }),
    token_ids: opt({ list: 'int' }),
    prompt_token_ids: opt({ list: 'int' }),
    ...(!stream && { prompt_logprobs: opt('any') }),
  },
});
const LogProb: Record<string, ShapeField> = {
  token: req('str'),
  logprob: dflt('float'),
  bytes: opt({ list: 'int' }),
};
const ChatLogProbs: Shape = {
  obj: {
    content: opt({ list: { obj: { ...LogProb, top_logprobs: dflt({ list: { obj: LogProb } }) } } }),
  },
};
const ToolCall: Shape = {
  obj: {
    id: dflt('str'),
    type: dflt({ literal: 'function' }),
    function: req({ obj: { name: req('str'), arguments: req('str') } }),
  },
};
const ChatMessage: Shape = {
  obj: {
    role: req('str'),
    content: opt('str'),
    refusal: opt('str'),
    tool_calls: dflt({ list: ToolCall }),
    reasoning: opt('str'),
  },
};
const DeltaMessage: Shape = {
  obj: {
    role: opt('str'),
    content: opt('str'),
    reasoning: opt('str'),
    tool_calls: dflt({
      list: {
        obj: {
          id: opt('str'),
          type: opt({ literal: 'function' }),
          index: req('int'),
          function: opt({ obj: { name: opt('str'), arguments: opt('str') } }),
        },
      },
    }),
  },
};

/** The vLLM response models, by name. */
export const VLLM_RESPONSES = {
  CompletionResponse: {
    obj: {
      id: dflt('str'),
      object: dflt({ literal: 'text_completion' }),
      created: dflt('int'),
      model: req('str'),
      choices: req({ list: completionChoice(false) }),
      system_fingerprint: opt('str'),
      usage: req(Usage),
    },
  },
  CompletionStreamResponse: {
    obj: {
      id: dflt('str'),
      object: dflt('str'),
      created: dflt('int'),
      model: req('str'),
      choices: req({ list: completionChoice(true) }),
      usage: opt(Usage),
    },
  },
  ChatCompletionResponse: {
    obj: {
      id: dflt('str'),
      object: dflt({ literal: 'chat.completion' }),
      created: dflt('int'),
      model: req('str'),
      choices: req({
        list: {
          obj: {
            index: req('int'),
            message: req(ChatMessage),
            logprobs: opt(ChatLogProbs),
            finish_reason: opt('str'),
            stop_reason: opt({ union: ['int', 'str'] }),
            token_ids: opt({ list: 'int' }),
          },
        },
      }),
      usage: req(Usage),
      prompt_logprobs: opt('any'),
      prompt_token_ids: opt({ list: 'int' }),
    },
  },
  ChatCompletionStreamResponse: {
    obj: {
      id: dflt('str'),
      object: dflt({ literal: 'chat.completion.chunk' }),
      created: dflt('int'),
      model: req('str'),
      choices: req({
        list: {
          obj: {
            index: req('int'),
            delta: req(DeltaMessage),
            logprobs: opt(ChatLogProbs),
            finish_reason: opt('str'),
            stop_reason: opt({ union: ['int', 'str'] }),
            token_ids: opt({ list: 'int' }),
          },
        },
      }),
      usage: opt(Usage),
      prompt_token_ids: opt({ list: 'int' }),
    },
  },
  ModelList: {
    obj: {
      object: dflt('str'),
      data: dflt({
        list: {
          obj: {
            id: req('str'),
            object: dflt('str'),
            created: dflt('int'),
            owned_by: dflt('str'),
            root: opt('str'),
            parent: opt('str'),
            max_model_len: opt('int'),
            permission: dflt({ list: 'dict' }),
          },
        },
      }),
    },
  },
} satisfies Record<string, Shape>;

function shapeProblems(shape: Shape, v: unknown, at: string, out: string[]): void {
  if (typeof shape === 'string') {
    // A response is JSON a vLLM client parses: types must be the JSON ones (no lax strings).
    const ok =
      shape === 'int'
        ? typeof v === 'number' && Number.isInteger(v)
        : shape === 'float'
          ? typeof v === 'number'
          : shape === 'any' || typeOk(shape, v);
    if (!ok) out.push(`${at}: expected ${shape}, got ${JSON.stringify(v)}`);
    return;
  }
  if ('literal' in shape) {
    const want = shape.literal === 'null' ? null : shape.literal;
    if (v !== want) out.push(`${at}: expected ${JSON.stringify(want)}, got ${JSON.stringify(v)}`);
    return;
  }
  if ('union' in shape) {
    const any = shape.union.some((s) => {
      const o: string[] = [];
      shapeProblems(s, v, at, o);
      return o.length === 0;
    });
    if (!any) out.push(`${at}: no variant matches ${JSON.stringify(v)}`);
    return;
  }
  if ('list' in shape) {
    if (!Array.isArray(v)) {
      out.push(`${at}: expected a list`);
      return;
    }
    v.forEach((x, i) => {
      shapeProblems(shape.list, x, `${at}[${i}]`, out);
    });
    return;
  }
  if ('map' in shape) {
    if (!isObj(v)) {
      out.push(`${at}: expected an object`);
      return;
    }
    for (const [k, x] of Object.entries(v)) shapeProblems(shape.map, x, `${at}.${k}`, out);
    return;
  }
  if (!isObj(v)) {
    out.push(`${at}: expected an object`);
    return;
  }
  for (const [k, f] of Object.entries(shape.obj)) {
    const path = at ? `${at}.${k}` : k;
    if (!(k in v)) {
      if (f.required) out.push(`${path}: Field required`);
      continue;
    }
    if (v[k] === null) {
      if (!f.nullable) out.push(`${path}: must not be null`);
      continue;
    }
    shapeProblems(f.shape, v[k], path, out);
  }
}

/** Why a client parsing `body` with vLLM's response model `model` would fail ([] = it parses). */
export function vllmResponseProblems(model: keyof typeof VLLM_RESPONSES, body: unknown): string[] {
  const out: string[] = [];
  shapeProblems(VLLM_RESPONSES[model], body, '', out);
  return out;
}
