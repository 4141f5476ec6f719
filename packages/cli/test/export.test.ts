import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadHfModel, loadLoraAdapter, readArtifactsManifest } from '@flowgrpo/models';
import { ReferenceDecoder, referenceSequenceLogprobs } from '@flowgrpo/models/testing';
import { LoraPolicy, type TrainRow, targetsOf } from '@flowgrpo/trainer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { grpoConfig, LORA, sftConfig, tinyModel, writeConfig } from './train-fixtures.js';

// A checkpoint's adapter folder as PEFT writes one (read by an independent stdlib python3
// reader), and `flowgrpo export`: artifacts with the adapter's LoRA shape, and --merge, whose HF
// folder gives the log-probabilities of base + adapter (the LoRA graph at lora_scale 1) to 1e-5.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-export-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let model: string;
let checkpoint: string;

beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
  // A real checkpoint: 2 SFT steps at a learning rate high enough to move B away from 0.
  const cfg = writeConfig(join(tmp, 'run.json'), sftConfig(tmp, model, { learning_rate: 0.1 }));
  const io = captureIO(tmp);
  expect(await runCli(['train', '--config', cfg], io), io.err).toBe(0);
  checkpoint = join(tmp, 'run-sft', 'checkpoint-2');
});

/** An SFT config `<name>.json` on `modelOrArtifacts`, its output_dir `<name>` beside it, in tmp. */
function runConfig(name: string, modelOrArtifacts: string, extra: object): string {
  return writeConfig(
    join(tmp, `${name}.json`),
    sftConfig(tmp, modelOrArtifacts, { output_dir: join(tmp, name), ...extra }),
  );
}

// Header + per tensor [dtype, shape, finite?] of a safetensors file, read with the stdlib only.
const PY_READER = `
import json, math, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
out = {}
for k, v in h.items():
    if k == '__metadata__': continue
    s, e = v['data_offsets']
    count = math.prod(v['shape'])
    assert v['dtype'] == 'F32' and e - s == 4 * count, (k, v)
    a = struct.unpack('<%df' % count, b[8 + n + s:8 + n + e])
    out[k] = [v['dtype'], list(v['shape']), all(math.isfinite(x) for x in a), max(abs(x) for x in a)]
print(json.dumps({'metadata': h.get('__metadata__'), 'tensors': out}))`;

describe("a checkpoint's adapter folder", () => {
  it("has PEFT's layout, config keys, tensor names and shapes", async () => {
    for (const f of [
      'adapter_config.json',
      'adapter_model.safetensors',
      'optimizer.safetensors',
      'trainer_state.json',
    ])
      expect(existsSync(join(checkpoint, f)), f).toBe(true);
    const cfg = JSON.parse(readFileSync(join(checkpoint, 'adapter_config.json'), 'utf8'));
    // The keys PEFT's LoraConfig.from_pretrained and vLLM's LoRA loader read.
    expect(cfg).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: LORA.r,
      lora_alpha: LORA.lora_alpha,
      target_modules: LORA.target_modules,
      bias: 'none',
      use_rslora: false,
      fan_in_fan_out: false,
      base_model_name_or_path: model,
    });
    const got = JSON.parse(
      execFileSync('python3', ['-c', PY_READER, join(checkpoint, 'adapter_model.safetensors')], {
        encoding: 'utf8',
      }),
    ) as {
      metadata: Record<string, string>;
      tensors: Record<string, [string, number[], boolean, number]>;
    };
    expect(got.metadata).toEqual({ format: 'pt' });
    // PEFT's names: base_model.model.model.layers.{i}.{self_attn|mlp}.{module}.lora_{A|B}.weight,
    // A: [r, in_features], B: [out_features, r] (nn.Linear's [out, in] layout).
    // The tiny model (train-fixtures.ts): hidden 32, 2 query heads and 1 KV head of 16, MLP 64.
    // q_proj 32 → 32, v_proj 32 → 16, up_proj 32 → 64; r = 2.
    const L = 'base_model.model.model.layers.0';
    const expected: Record<string, number[]> = {
      [`${L}.self_attn.q_proj.lora_A.weight`]: [2, 32],
      [`${L}.self_attn.q_proj.lora_B.weight`]: [32, 2],
      [`${L}.self_attn.v_proj.lora_A.weight`]: [2, 32],
      [`${L}.self_attn.v_proj.lora_B.weight`]: [16, 2],
      [`${L}.mlp.up_proj.lora_A.weight`]: [2, 32],
      [`${L}.mlp.up_proj.lora_B.weight`]: [64, 2],
    };
    const config = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'));
    expect(config).toMatchObject({
      hidden_size: 32,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      head_dim: 16,
      intermediate_size: 64,
      num_hidden_layers: 1,
    });
    expect(Object.keys(got.tensors).sort()).toEqual(Object.keys(expected).sort());
    for (const [name, shape] of Object.entries(expected)) {
      const [dtype, s, finite, maxAbs] = got.tensors[name]!;
      expect([dtype, s, finite], name).toEqual(['F32', shape, true]);
      // Trained: B moved away from PEFT's zero init; A is non-zero from its Kaiming init.
      expect(maxAbs, name).toBeGreaterThan(0);
    }
    const state = JSON.parse(readFileSync(join(checkpoint, 'trainer_state.json'), 'utf8'));
    expect(state.global_step).toBe(2);
  });
});

describe('flowgrpo export', () => {
  it('builds artifacts with the LoRA shape of an adapter', async () => {
    const out = join(tmp, 'artifacts');
    const io = captureIO(tmp);
    expect(
      await runCli(['export', '--model', model, '--adapter', checkpoint, '--out', out], io),
      io.err,
    ).toBe(0);
    const m = readArtifactsManifest(out);
    // The training graphs (train_step needs LoRA) and the decode graph rollouts use.
    expect(Object.keys(m.graphs)).toEqual(
      expect.arrayContaining(['decode', 'logprobs', 'prefill', 'train_step']),
    );
    expect(m.lora).toMatchObject({
      r: LORA.r,
      alpha: LORA.lora_alpha,
      targetModules: LORA.target_modules,
      scaling: LORA.lora_alpha / LORA.r,
    });
    // An existing --out is not replaced without --overwrite.
    const again = captureIO(tmp);
    expect(await runCli(['export', '--model', model, '--out', out], again)).toBe(2);
    expect(again.err).toContain('--overwrite');
    // A folder of the user's that holds no artifacts is not replaced, even with --overwrite.
    const mine = join(tmp, 'mine');
    mkdirSync(mine);
    writeFileSync(join(mine, 'notes.txt'), 'mine');
    const notArtifacts = captureIO(tmp);
    expect(
      await runCli(['export', '--model', model, '--out', mine, '--overwrite'], notArtifacts),
    ).toBe(2);
    expect(notArtifacts.err).toContain('refusing to replace it');
    expect(readFileSync(join(mine, 'notes.txt'), 'utf8')).toBe('mine');
  });

  it('--merge writes a HF folder whose log-probs equal base + adapter to 1e-5', async () => {
    const out = join(tmp, 'merged');
    const io = captureIO(tmp);
    expect(
      await runCli(
        ['export', '--model', model, '--adapter', checkpoint, '--out', out, '--merge'],
        io,
      ),
      io.err,
    ).toBe(0);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
      expect(existsSync(join(out, f)), f).toBe(true);
    expect(existsSync(join(out, 'adapter_config.json'))).toBe(false);

    // Teacher-forced log-probs of one sequence: the merged model in the float64-softmax
    // reference decoder (plain weights, no LoRA) against the base model's ONNX logprobs graph
    // with the adapter as LoRA inputs at lora_scale 1 — two independent implementations.
    const merged = new ReferenceDecoder(await loadHfModel(out));
    const base = new ReferenceDecoder(await loadHfModel(model));
    const tokens = Int32Array.from([
      1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33,
    ]);
    const row: TrainRow = {
      tokens,
      mask: Uint8Array.from(tokens, (_, i) => (i === 0 ? 0 : 1)),
      logprobs: new Float32Array(tokens.length).fill(Number.NaN),
      advantage: 0,
      trajectory: 0,
      turn: 0,
    };
    const targets = targetsOf([row]);
    const weights = await loadHfModel(model);
    const { params } = await loadLoraAdapter(checkpoint, weights.config);
    const policy = await LoraPolicy.open({ artifacts: join(tmp, 'artifacts'), params });
    let adapted: Float32Array;
    try {
      adapted = await policy.logprobs([row], targets, {
        loraScale: 1,
        temperature: 1,
        maxTokensPerMicrobatch: 256,
      });
    } finally {
      await policy.release();
    }
    const viaMerge = referenceSequenceLogprobs(merged, tokens);
    const viaBase = referenceSequenceLogprobs(base, tokens);
    expect(adapted.length).toBe(viaMerge.length);
    let maxMerge = 0;
    let maxBase = 0;
    for (let t = 0; t < viaMerge.length; t++) {
      maxMerge = Math.max(maxMerge, Math.abs(adapted[t]! - viaMerge[t]!));
      maxBase = Math.max(maxBase, Math.abs(viaBase[t]! - viaMerge[t]!));
    }
    expect(maxMerge).toBeLessThan(1e-5);
    // Not vacuous: the adapter moves the log-probs by far more than the tolerance.
    expect(maxBase).toBeGreaterThan(1e-3);
  });

  it('--out that is, holds or lies in the model or adapter folder is refused; they stay whole', async () => {
    // Each of these would have the export write into, or (with --overwrite) replace, its input.
    const link = join(tmp, 'model-link');
    symlinkSync(model, link);
    const cases: [string, string][] = [
      [checkpoint, `is the adapter folder ${checkpoint}`],
      [link, `is the model folder ${model}`],
      [join(model, 'merged'), `is inside the model folder ${model}`],
      [join(tmp, 'run-sft'), `holds the adapter folder ${checkpoint}`],
    ];
    const before = [readdirSync(model).sort(), readdirSync(checkpoint).sort()];
    for (const [out, says] of cases) {
      const io = captureIO(tmp);
      const args = ['export', '--model', model, '--adapter', checkpoint, '--out', out];
      expect(await runCli([...args, '--merge', '--overwrite'], io), out).toBe(1);
      expect(io.err).toMatch(/^\[CONFIG_ERROR\] --out /);
      expect(io.err).toContain(says);
    }
    expect([readdirSync(model).sort(), readdirSync(checkpoint).sort()]).toEqual(before);
    expect(existsSync(join(model, 'merged'))).toBe(false);
  });

  it('--overwrite replaces --out whole: a link the user left inside it is not written through', async () => {
    const victim = join(tmp, 'victim.txt');
    writeFileSync(victim, 'not a model');
    // --merge writes config.json and model.safetensors; the artifacts build writes artifacts.json
    // and weights.data: a link at each name, in an --out each kind may replace.
    const merged = join(tmp, 'merged-over-links');
    mkdirSync(merged);
    symlinkSync(victim, join(merged, 'config.json'));
    symlinkSync(victim, join(merged, 'model.safetensors'));
    const io = captureIO(tmp);
    const merge = ['export', '--model', model, '--adapter', checkpoint, '--out', merged, '--merge'];
    expect(await runCli([...merge, '--overwrite'], io), io.err).toBe(0);
    expect(lstatSync(join(merged, 'config.json')).isSymbolicLink()).toBe(false);

    const artifacts = join(tmp, 'artifacts-over-links');
    mkdirSync(artifacts);
    writeFileSync(join(artifacts, 'artifacts.json'), '{}');
    symlinkSync(victim, join(artifacts, 'weights.data'));
    const again = captureIO(tmp);
    expect(
      await runCli(['export', '--model', model, '--out', artifacts, '--overwrite'], again),
      again.err,
    ).toBe(0);
    expect(lstatSync(join(artifacts, 'weights.data')).isSymbolicLink()).toBe(false);
    expect(readFileSync(victim, 'utf8')).toBe('not a model');

    // --out itself a link the user made (to a folder on another disk): the merged model lands
    // where it points, and the link stays a link.
    const disk = join(tmp, 'other-disk', 'merged');
    mkdirSync(disk, { recursive: true });
    const viaLink = join(tmp, 'merged-link');
    symlinkSync(disk, viaLink);
    const linked = captureIO(tmp);
    expect(
      await runCli([...merge.slice(0, 5), '--out', viaLink, '--merge'], linked),
      linked.err,
    ).toBe(0);
    expect(lstatSync(viaLink).isSymbolicLink()).toBe(true);
    expect(existsSync(join(disk, 'model.safetensors'))).toBe(true);
  });

  it('--gradient-checkpointing: a train_step that recomputes each layer, which a run config must ask for', async () => {
    const out = join(tmp, 'artifacts-checkpointing');
    const io = captureIO(tmp);
    const args = ['export', '--model', model, '--adapter', checkpoint, '--out', out];
    expect(await runCli([...args, '--gradient-checkpointing'], io), io.err).toBe(0);
    expect(io.out).toContain('; gradient checkpointing;');
    expect(readArtifactsManifest(out).gradientCheckpointing).toBe(true);
    // Without LoRA there is no train_step for it to change.
    const bare = captureIO(tmp);
    const noLora = ['export', '--model', model, '--out', join(tmp, 'no-lora')];
    expect(await runCli([...noLora, '--gradient-checkpointing'], bare)).toBe(2);
    expect(bare.err).toContain('--gradient-checkpointing changes the train_step graph only');
    const merged = captureIO(tmp);
    const merge = ['--out', join(tmp, 'merged-ck'), '--merge', '--gradient-checkpointing'];
    expect(await runCli([...args.slice(0, 5), ...merge], merged)).toBe(2);
    expect(merged.err).toContain('--merge writes a HF folder');
    // A run on them without the key is refused, naming the flag; with it, it trains.
    const run = (name: string, extra: object) =>
      runConfig(name, out, { tokenizer: model, ...extra });
    const refused = captureIO(tmp);
    expect(await runCli(['train', '--config', run('ckpt-off', {})], refused)).toBe(1);
    expect(refused.err).toContain('[CONFIG_ERROR]');
    expect(refused.err).toContain('or set gradient_checkpointing: true');
    expect(existsSync(join(tmp, 'ckpt-off'))).toBe(false);
    const trained = captureIO(tmp);
    const on = run('ckpt-on', { gradient_checkpointing: true });
    expect(await runCli(['train', '--config', on], trained), trained.err).toBe(0);
  });

  it('--share-sampling-weights: a decode graph that casts per product, which a GRPO run with the key needs in bf16', async () => {
    const args = ['export', '--model', model, '--adapter', checkpoint];
    const bf16 = ['--base-weights-dtype', 'bfloat16'];
    const out = join(tmp, 'artifacts-shared-sampling');
    const io = captureIO(tmp);
    expect(
      await runCli([...args, '--out', out, ...bf16, '--share-sampling-weights'], io),
      io.err,
    ).toBe(0);
    expect(io.out).toContain('; decode casts per product (share_sampling_weights);');
    expect(readArtifactsManifest(out).decodeCastsPerUse).toBe(true);
    // Without decode among the graphs there is nothing for it to change; --merge builds none.
    const noDecode = captureIO(tmp);
    const logprobsOnly = ['--out', join(tmp, 'x-ssw'), '--graphs', 'logprobs'];
    expect(await runCli([...args, ...logprobsOnly, '--share-sampling-weights'], noDecode)).toBe(2);
    expect(noDecode.err).toContain('it needs decode among --graphs');
    const merged = captureIO(tmp);
    const merge = ['--out', join(tmp, 'merged-ssw'), '--merge', '--share-sampling-weights'];
    expect(await runCli([...args, ...merge], merged)).toBe(2);
    expect(merged.err).toContain('--merge writes a HF folder');

    // bf16 artifacts built without it: a GRPO run with the key is refused by the preflight,
    // naming the flag, before output_dir; on those built with it, the preflight passes.
    const atLoad = join(tmp, 'artifacts-bf16-at-load');
    expect(await runCli([...args, '--out', atLoad, ...bf16], captureIO(tmp))).toBe(0);
    const dir = join(tmp, 'grpo-ssw');
    mkdirSync(dir, { recursive: true });
    const config = (artifacts: string) =>
      writeConfig(
        join(dir, 'run.json'),
        grpoConfig(dir, artifacts, { tokenizer: model, share_sampling_weights: true }),
      );
    const refused = captureIO(tmp);
    expect(await runCli(['train', '--config', config(atLoad), '--dry-run'], refused)).toBe(1);
    expect(refused.err).toContain(
      '[CONFIG_ERROR] model: share_sampling_weights: true, but the artifacts hold the projections in bfloat16',
    );
    expect(refused.err).toContain('flowgrpo export --share-sampling-weights');
    expect(existsSync(join(dir, 'run-grpo'))).toBe(false);
    const passed = captureIO(tmp);
    expect(await runCli(['train', '--config', config(out), '--dry-run'], passed), passed.err).toBe(
      0,
    );
  });

  it('--base-weights-dtype: the projections in half; a run that names another dtype is refused; auto follows the checkpoint', async () => {
    const out = join(tmp, 'artifacts-bf16');
    const io = captureIO(tmp);
    const args = ['export', '--model', model, '--adapter', checkpoint, '--out', out];
    expect(await runCli([...args, '--base-weights-dtype', 'bfloat16'], io), io.err).toBe(0);
    expect(io.out).toContain('; projections in bfloat16;');
    expect(readArtifactsManifest(out).baseWeightsDtype).toBe('bfloat16');
    const bad = captureIO(tmp);
    const wrong = ['--out', join(tmp, 'x-bf'), '--base-weights-dtype', 'half'];
    expect(await runCli([...args.slice(0, 5), ...wrong], bad)).toBe(2);
    expect(bad.err).toContain('--base-weights-dtype must be auto, float32, bfloat16, float16');
    const run = (name: string, extra: object) =>
      runConfig(name, out, { tokenizer: model, ...extra });
    const refused = captureIO(tmp);
    const f32 = run('half-f32', { base_weights_dtype: 'float32' });
    expect(await runCli(['train', '--config', f32], refused)).toBe(1);
    expect(refused.err).toContain(
      '[CONFIG_ERROR] model: base_weights_dtype: float32, but the artifacts hold the projections in bfloat16',
    );
    expect(existsSync(join(tmp, 'half-f32'))).toBe(false);
    const trained = captureIO(tmp);
    expect(await runCli(['train', '--config', run('half-auto', {})], trained), trained.err).toBe(0);

    // A bf16 checkpoint, named as a HF folder: `flowgrpo train` builds its artifacts in bf16 under
    // 'auto', and in float32 when the config says so (a rebuild: the stamp holds the dtype).
    const bf16 = join(tmp, 'tiny-bf16');
    await tinyModel(bf16, { dtype: 'BF16' });
    const fromHf = (name: string, extra: object) =>
      runConfig(name, bf16, { max_steps: 1, ...extra });
    const auto = captureIO(tmp);
    expect(await runCli(['train', '--config', fromHf('hf-auto', {})], auto), auto.err).toBe(0);
    expect(readArtifactsManifest(join(tmp, 'hf-auto', 'artifacts')).baseWeightsDtype).toBe(
      'bfloat16',
    );
    const asked = captureIO(tmp);
    const float = fromHf('hf-auto', { base_weights_dtype: 'float32', overwrite_output_dir: true });
    expect(await runCli(['train', '--config', float], asked), asked.err).toBe(0);
    expect(asked.err).toContain('artifacts: building');
    expect(
      readArtifactsManifest(join(tmp, 'hf-auto', 'artifacts')).baseWeightsDtype,
    ).toBeUndefined();
  });

  it('--merge needs --adapter; --help', async () => {
    const io = captureIO(tmp);
    expect(await runCli(['export', '--model', model, '--out', join(tmp, 'x'), '--merge'], io)).toBe(
      2,
    );
    expect(io.err).toContain('--merge needs --adapter');
    const help = captureIO(tmp);
    expect(await runCli(['export', '--help'], help)).toBe(0);
    expect(help.out).toContain('--merge');
  });
});
