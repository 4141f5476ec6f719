export {
  type AdamWGraphOptions,
  type AdamWHyperParams,
  type AdamWNames,
  type AdamWParamSpec,
  type AdamWResult,
  type AdamWState,
  appendAdamW,
  buildAdamWGraph,
  type HyperParam,
} from './adamw.js';
