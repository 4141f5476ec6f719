export {
  BYTE_LEVEL_SPECIAL_TOKENS,
  ByteLevelTokenizer,
  type ByteLevelTokenizerOptions,
  bytesToUnicode,
  CHATML_TEMPLATE,
} from './byte-level-tokenizer.js';
export { HfTokenizer, type HfTokenizerConfig } from './hf-tokenizer.js';
export { Llama2cTokenizer } from './llama2c-tokenizer.js';
export { loadTokenizer } from './load-tokenizer.js';
export type { ChatTemplateOptions, DecodeOptions, EncodeOptions, Tokenizer } from './tokenizer.js';
