export {
  type LoadHfModelOptions,
  loadHfModel,
  type SaveHfModelOptions,
  saveHfModel,
} from './hf-folder.js';
export {
  type Llama2cHeader,
  llama2cConfig,
  loadLlama2cCheckpoint,
  parseLlama2cCheckpoint,
  parseLlama2cHeader,
  permuteRopeRows,
} from './llama2c-checkpoint.js';
export {
  convertWeightTensor,
  type LoadDType,
  type ModelWeights,
  type WeightDType,
  weightAsFloat32,
} from './model-weights.js';
export {
  EMBED_TOKENS,
  expectedTensorShapes,
  FINAL_NORM,
  LM_HEAD,
  layerTensorNames,
} from './tensor-names.js';
export { checkTensorShapes } from './validate.js';
