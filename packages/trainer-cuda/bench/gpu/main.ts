// The Node side of the GPU measurement (scripts/gpu/run.sh), bundled into one file by
// scripts/gpu/bundle.sh: one subcommand per step, each writing its figures to `--out`.
//   init     --results F --mode gpu|cpu-smoke        start results.json
//   record   --results F --name N --out F --rc N --start MS --end MS --log F [--gpu-samples F]
//   summary  --results F                              print the table
//   env      --mode M --out F
//   adapter  --vkinfo F --out F
//   cuda-probe --ort-probe F --out F
//   fidelity --shapes F --work DIR --mode M --vkinfo F --out F
//   decode | train | profile --shapes F --shape NAME --device cpu|webgpu --work DIR --mode M
//            --vkinfo F --out F [--variant fp16|ckpt|fp16-ckpt: train's build switches]

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Device } from '@flowgrpo/models';
import { deviceAvailability } from '@flowgrpo/models';
import { exportFidelity, type FidelitySpec } from './fidelity.js';
import { benchDecode, benchTrain, parseTrainVariant, readShape } from './ours.js';
import { adapter, cudaProbe, environment, refuseWebgpu } from './probes.js';
import { profileShape } from './profile.js';
import { initResults, readResults, recordStep, writeStep } from './results.js';
import { summarize } from './summary.js';

const { positionals, values: o } = parseArgs({
  allowPositionals: true,
  options: Object.fromEntries(
    [
      'results',
      'mode',
      'name',
      'out',
      'rc',
      'start',
      'end',
      'log',
      'gpu-samples',
      'vkinfo',
      'ort-probe',
      'shapes',
      'shape',
      'device',
      'work',
      'variant',
    ].map((k) => [k, { type: 'string' as const }]),
  ),
});

function need(key: string): string {
  const v = o[key];
  if (typeof v !== 'string') throw new Error(`--${key} is required`);
  return v;
}

const command = positionals[0];
switch (command) {
  case 'init':
    initResults(need('results'), need('mode') === 'gpu' ? 'gpu' : 'cpu-smoke');
    break;
  case 'record': {
    let logTail = '';
    try {
      logTail = readFileSync(need('log'), 'utf8').slice(-4000);
    } catch {}
    const r = recordStep(need('results'), {
      name: need('name'),
      outFile: need('out'),
      exitCode: Number(need('rc')),
      startMs: Number(need('start')),
      endMs: Number(need('end')),
      logTail,
      ...(o['gpu-samples'] && { gpuSamples: o['gpu-samples'] as string }),
    });
    console.log(
      `[${need('name')}] ${r.ok ? 'ok' : r.skipped ? 'skipped' : 'FAILED'} in ${r.seconds} s${r.ok ? '' : `: ${String(r.skipped ?? r.error).slice(0, 400)}`}`,
    );
    break;
  }
  case 'summary':
    console.log(summarize(readResults(need('results'))));
    break;
  case 'env':
    writeStep(need('out'), environment(need('mode')));
    break;
  case 'adapter':
    writeStep(need('out'), await adapter(need('vkinfo')));
    break;
  case 'cuda-probe':
    writeStep(need('out'), await cudaProbe(need('ort-probe')));
    break;
  case 'fidelity': {
    const spec = (JSON.parse(readFileSync(need('shapes'), 'utf8')) as { fidelity: FidelitySpec })
      .fidelity;
    const refuse = refuseWebgpu(need('vkinfo'), need('mode'));
    const summary = await exportFidelity(spec, need('work'), {
      run: refuse === undefined,
      ...(refuse && { why: refuse }),
    });
    writeStep(need('out'), { ...summary, folder: need('work') });
    break;
  }
  case 'decode':
  case 'train':
  case 'profile': {
    const device = need('device') as Device;
    const refuse = device === 'webgpu' ? refuseWebgpu(need('vkinfo'), need('mode')) : undefined;
    if (refuse) {
      writeStep(need('out'), { ok: false, skipped: `WebGPU figures refused: ${refuse}` });
      break;
    }
    // Without WebGPU here the smoke run skips its WebGPU steps; on the GPU run they fail.
    const available = await deviceAvailability(device);
    if (!available.available && need('mode') !== 'gpu') {
      writeStep(need('out'), { ok: false, skipped: `${device} unavailable: ${available.reason}` });
      break;
    }
    const shape = readShape(need('shapes'), need('shape'));
    const variant = parseTrainVariant(o.variant);
    const figures =
      command === 'decode'
        ? await benchDecode(shape, device, need('work'))
        : command === 'train'
          ? await benchTrain(shape, device, need('work'), variant)
          : await profileShape(shape, device, need('work'));
    // On the CPU smoke run lavapipe stands in for the GPU: say so in the figures themselves.
    if (device === 'webgpu' && need('mode') !== 'gpu') figures.softwareAdapter = true;
    writeStep(need('out'), { shape: need('shape'), ...figures });
    break;
  }
  default:
    console.error(`unknown step ${command ?? '(none)'}`);
    process.exit(2);
}
// Native sessions and Dawn may keep the event loop alive; every step has written its file.
process.exit(0);
