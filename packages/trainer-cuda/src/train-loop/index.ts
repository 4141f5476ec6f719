export { TrainLoopError } from './errors.js';
export {
  type TrainStepBuild,
  type TrainStepOptimizer,
  type TrainStepResult,
  TrainStepRunner,
  type TrainStepRunnerOptions,
  type TrainStepSessionOptions,
  type TrainStepState,
} from './train-step-runner.js';
