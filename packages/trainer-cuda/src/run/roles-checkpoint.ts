import { existsSync, readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeDirAtomically } from '@flowgrpo/core';
import type { DecoderConfig, LoraConfig } from '@flowgrpo/models';
import { type LoraParams, loadLoraAdapter, saveLoraAdapter } from '@flowgrpo/models';
import type { TrainStepState } from '../optimizer-step/train-step-runner.js';
import {
  CheckpointError,
  checkpointName,
  type LoadedCheckpoint,
  readOptimizerState,
  readTrainerState,
  TRAINER_STATE,
  type TrainerState,
  writeOptimizerState,
} from './checkpoint.js';

// The checkpoint of a run that trains several adapters at once (MultiRoleGRPOTrainer: one LoRA
// adapter per role on a shared base). One step, one folder, written whole or not at all:
//
//   checkpoint-<step>/trainer_state.json              the run's state (step, data order, rng)
//   checkpoint-<step>/<role>/adapter_model.safetensors  + adapter_config.json (a PEFT adapter)
//   checkpoint-<step>/<role>/optimizer.safetensors     that role's AdamW moments
//
// so each role folder loads alone with PEFT, and a resume restores every role exactly.

/** One trained role's part of a checkpoint. */
export interface RoleCheckpointPart {
  config: DecoderConfig;
  lora: LoraConfig;
  state: TrainStepState;
}

/** Writes checkpoint-<step> with a folder per role; returns its path. */
export async function saveRolesCheckpoint(
  outputDir: string,
  o: { roles: Record<string, RoleCheckpointPart>; trainer: TrainerState },
): Promise<string> {
  const dir = join(outputDir, checkpointName(o.trainer.global_step));
  await writeDirAtomically(dir, async (tmp) => {
    for (const [name, part] of Object.entries(o.roles)) {
      const folder = join(tmp, name);
      const params: LoraParams = new Map(
        Object.entries(part.state.params).map(([k, t]) => [k, t.data as Float32Array<ArrayBuffer>]),
      );
      await saveLoraAdapter(folder, part.config, part.lora, params);
      await writeOptimizerState(folder, part.state);
    }
    await writeFile(join(tmp, TRAINER_STATE), `${JSON.stringify(o.trainer, null, 2)}\n`);
  });
  return dir;
}

export interface LoadedRolesCheckpoint {
  dir: string;
  trainer: TrainerState;
  /** Per role folder: its adapter and optimizer state. */
  roles: Record<string, Pick<LoadedCheckpoint, 'params' | 'optimizer'>>;
}

/** Reads a checkpoint written by saveRolesCheckpoint; a missing part is a CheckpointError. */
export async function loadRolesCheckpoint(
  dir: string,
  config: DecoderConfig,
): Promise<LoadedRolesCheckpoint> {
  const trainer = readTrainerState(dir);
  const names = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(dir, e.name, 'adapter_config.json')))
    .map((e) => e.name)
    .sort();
  if (names.length === 0)
    throw new CheckpointError(
      'no role folder (<role>/adapter_config.json) in it: not a checkpoint of a multi-role run',
      { path: dir },
    );
  const roles: LoadedRolesCheckpoint['roles'] = {};
  for (const name of names) {
    const folder = join(dir, name);
    let params: LoraParams;
    try {
      params = (await loadLoraAdapter(folder, config)).params;
    } catch (cause) {
      throw new CheckpointError(`${name}: ${(cause as Error).message}`, { path: dir }, { cause });
    }
    roles[name] = {
      params,
      optimizer: await readOptimizerState(folder, params, trainer.global_step),
    };
  }
  return { dir, trainer, roles };
}
