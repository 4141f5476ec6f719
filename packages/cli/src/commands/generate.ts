import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, FileNotFoundError } from '@flowgrpo/core';
import {
  chooseDevice,
  DecoderArtifacts,
  DecoderGenerator,
  eosTokenIds,
  loadDecoderModel,
  loadTokenizer,
} from '@flowgrpo/models';
import { buildTrainingArtifacts, checkSamplingMemory } from '@flowgrpo/trainer';
import { type Command, numberOption, stringOption, UsageError } from '../command.js';
import { resolveModelArg } from '../hub-names.js';
import { terminalSafe, terminalSafeJson } from '../terminal-text.js';

const usage = `Usage:
  flowgrpo generate --model PATH [--tokenizer PATH] --prompt TEXT [options]
      Generate text with a local decoder through its ONNX prefill/decode graphs.
      PATH is a HF model folder (config.json + safetensors + tokenizer.json), a Hugging Face
      Hub name org/name[@revision] (downloaded into $HF_HOME/hub: docs/guides/hub.md) or a
      llama2.c .bin checkpoint (then --tokenizer names its tokenizer .bin).
  Options:
    --max-new-tokens N   tokens to generate (default 256)
    --temperature T      0 = greedy (default 1)
    --top-p P            nucleus sampling (default 1)
    --top-k K            keep the K most likely tokens (default: all)
    --seed N             same seed, same output
    --device D           cpu | auto | cuda | webgpu (default cpu)
    --threads N          CPU threads per op (default 1: one stream runs fastest on one thread)
    --no-bos             do not prepend BOS to the prompt
    --json               print {text, completion, prompt_ids, ids, logprobs, finish_reason}
    --skip-memory-check  generate even when the estimated peak memory exceeds what is free
  Before the graphs are built, the run's peak memory is estimated (the weights, the session's
  copies of them, the KV cache) and a run that will not fit is refused (INSUFFICIENT_MEMORY).
  Prints the prompt followed by the completion (as llama2.c's run.c does), and on stderr the
  device it ran on, e.g. "device: cpu (2 threads)".`;

/**
 * The stderr line that says where the model ran: the device 'auto' resolved to and why (`why`,
 * as train and eval say it), the CPU threads.
 */
export function deviceLine(
  device: string,
  requested: string,
  threads: number | undefined,
  why?: string,
): string {
  const notes: string[] = [];
  if (why !== undefined) notes.push(why);
  else if (requested !== device) notes.push(`--device ${requested}`);
  if (device === 'cpu') {
    notes.push(
      threads === undefined
        ? "threads: onnxruntime's default"
        : `${threads} thread${threads === 1 ? '' : 's'}`,
    );
  }
  return `device: ${device}${notes.length ? ` (${notes.join('; ')})` : ''}\n`;
}

/**
 * A folder given as --model that is not a HF model folder but holds llama2.c `.bin` files: the
 * message that says which file to pass (llama2.c tokenizers are named tok*.bin / tokenizer.bin).
 */
async function llama2cFolderHint(dir: string): Promise<string | undefined> {
  const names = await readdir(dir);
  if (names.includes('config.json')) return undefined;
  const bins = names.filter((n) => n.endsWith('.bin')).sort();
  if (bins.length === 0) return undefined;
  const tokenizers = bins.filter((n) => /^tok/i.test(n));
  const models = bins.filter((n) => !/^tok/i.test(n));
  const model = models[0] ?? bins[0]!;
  const tok = tokenizers[0];
  return (
    `--model ${dir} is a folder holding llama2.c .bin files (${bins.join(', ')}), not a HF model ` +
    `folder (no config.json); pass the checkpoint file itself: --model ${join(dir, model)}` +
    (tok ? ` --tokenizer ${join(dir, tok)}` : ' --tokenizer <tok.bin>')
  );
}

function intOption(args: Parameters<Command['run']>[0], name: string): number | undefined {
  const n = numberOption(args, name);
  if (n !== undefined && (!Number.isInteger(n) || n < 0))
    throw new UsageError(`--${name} must be a whole number, got ${n}`);
  return n;
}

export const generateCommand: Command = {
  name: 'generate',
  summary: 'generate text with a local model (HF folder or llama2.c .bin) on ONNX Runtime',
  usage,
  options: {
    model: { type: 'string' },
    tokenizer: { type: 'string' },
    prompt: { type: 'string' },
    'max-new-tokens': { type: 'string' },
    temperature: { type: 'string' },
    'top-p': { type: 'string' },
    'top-k': { type: 'string' },
    seed: { type: 'string' },
    device: { type: 'string' },
    threads: { type: 'string' },
    'no-bos': { type: 'boolean' },
    json: { type: 'boolean' },
    'skip-memory-check': { type: 'boolean' },
  },
  async run(args, io) {
    const modelArg = stringOption(args, 'model');
    if (!modelArg) throw new UsageError('--model is required');
    const prompt = stringOption(args, 'prompt') ?? args.positionals[0];
    if (prompt === undefined) throw new UsageError('--prompt is required');
    const requested = stringOption(args, 'device') ?? 'cpu';
    if (!['cpu', 'auto', 'cuda', 'webgpu'].includes(requested))
      throw new UsageError(`--device must be cpu, auto, cuda or webgpu, got '${requested}'`);
    const temperature = numberOption(args, 'temperature') ?? 1;
    if (temperature < 0) throw new UsageError('--temperature must be >= 0');
    const topP = numberOption(args, 'top-p');
    if (topP !== undefined && !(topP > 0 && topP <= 1))
      throw new UsageError('--top-p must be in (0, 1]');
    const topK = intOption(args, 'top-k');
    const maxNewTokens = intOption(args, 'max-new-tokens') ?? 256;
    const seed = intOption(args, 'seed');
    const threads = intOption(args, 'threads');
    if (threads === 0) throw new UsageError('--threads must be at least 1');

    const modelPath = await resolveModelArg(modelArg, io, '--model');
    const isDir = (await stat(modelPath).catch(() => undefined))?.isDirectory();
    if (isDir === undefined) throw new FileNotFoundError(modelPath);
    if (isDir) {
      const hint = await llama2cFolderHint(modelPath);
      if (hint) throw new UsageError(hint);
      if (!(await stat(join(modelPath, 'config.json')).catch(() => undefined)))
        throw new ConfigError(
          `--model ${modelPath} is not a HF model folder (no config.json)`,
          { key: 'model' },
          {
            hint: 'give a folder with config.json, *.safetensors and tokenizer.json, or a llama2.c .bin file',
          },
        );
    }
    const tokArg = stringOption(args, 'tokenizer');
    if (!isDir && !tokArg)
      throw new UsageError('a llama2.c .bin model needs --tokenizer <tok.bin>');
    if (tokArg && !(await stat(resolve(io.cwd, tokArg)).catch(() => undefined))) {
      throw new FileNotFoundError(resolve(io.cwd, tokArg));
    }
    const weights = await loadDecoderModel(modelPath);
    const tokenizer = await loadTokenizer(tokArg ? resolve(io.cwd, tokArg) : modelPath, {
      vocabSize: weights.config.vocabSize,
    });

    // 'auto' is resolved here, as train and eval do, so the line below can say why it picked
    // what it did (never a software WebGPU adapter) and the CPU gets its fused graph.
    const auto = requested === 'auto' ? await chooseDevice('auto') : undefined;
    const device = auto?.device ?? requested;
    const maxPositions = Math.min(weights.config.maxPositionEmbeddings, 32768);
    // Memory, before anything is built: the model as loaded, the session's copies, the cache.
    if (args.values['skip-memory-check'] !== true) {
      const { warning } = checkSamplingMemory({
        config: weights.config,
        rows: 1,
        promptTokens: tokenizer.encode(prompt, { addBos: args.values['no-bos'] !== true }).length,
        newTokens: maxNewTokens,
        maxPositions,
        hostWeights: true,
        flags: { newTokens: '--max-new-tokens', skip: '--skip-memory-check' },
      });
      if (warning) io.stderr(`warning: ${warning}\n`);
    }
    const dir = await mkdtemp(join(tmpdir(), 'flowgrpo-generate-'));
    try {
      // On the CPU the fused generate graph (its decode loop runs inside ONNX Runtime); on a GPU
      // EP the standard decode graph alone (it prefills from an empty cache: one copy of the
      // weights).
      const graph = device === 'cpu' ? 'generate' : 'decode';
      buildTrainingArtifacts(weights, dir, {
        graphs: [graph],
        maxPositions,
      });
      // One stream: one thread measured fastest (docs/performance.md), more only when asked.
      const intraOpThreads = threads ?? (device === 'cpu' ? 1 : undefined);
      const artifacts = await DecoderArtifacts.open(dir, {
        device: device as 'cpu' | 'auto' | 'cuda' | 'webgpu',
        ...(intraOpThreads !== undefined && { intraOpThreads }),
      });
      try {
        const ran = artifacts.session(graph).device;
        io.stderr(deviceLine(ran, requested, ran === 'cpu' ? intraOpThreads : threads, auto?.why));
        const promptIds = Array.from(
          tokenizer.encode(prompt, { addBos: args.values['no-bos'] !== true }),
        );
        if (promptIds.length === 0)
          throw new UsageError('the prompt encodes to no tokens; drop --no-bos');
        // llama2.c's run.c ends a sample at BOS; HF models at their EOS ids.
        const stop = new Set(eosTokenIds(weights.config));
        if (tokenizer.eosTokenId !== undefined) stop.add(tokenizer.eosTokenId);
        if (!isDir && tokenizer.bosTokenId !== undefined) stop.add(tokenizer.bosTokenId);
        const room = artifacts.manifest.maxPositions - promptIds.length;
        const [out] = await new DecoderGenerator(artifacts).generate([promptIds], {
          maxNewTokens: Math.max(0, Math.min(maxNewTokens, room)),
          temperature,
          ...(topP !== undefined && { topP }),
          ...(topK !== undefined && { topK }),
          ...(seed !== undefined && { seed }),
          stopTokenIds: [...stop],
        });
        const r = out!;
        const ids = Array.from(r.tokens);
        const kept = r.stopTokenId === undefined ? ids : ids.slice(0, -1);
        const text = tokenizer.decode([...promptIds, ...kept], { skipSpecialTokens: true });
        const completion = tokenizer.decode(kept, { skipSpecialTokens: true });
        if (args.values.json === true) {
          io.stdout(
            `${terminalSafeJson({
              text,
              completion,
              prompt_ids: promptIds,
              ids,
              logprobs: Array.from(r.logprobs),
              finish_reason: r.finishReason,
              device: artifacts.session(graph).device,
            })}\n`,
          );
        } else io.stdout(`${terminalSafe(text)}\n`);
        return 0;
      } finally {
        await artifacts.release();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
};
