// Public API of @flowgrpo/tools: the Tool interface and registry, `defineTool` for your own tools,
// the built-in tools' factories (python, calculator, Wikipedia, web RAG, web search, generalist)
// and the backends, providers and retrieval pieces they are built from. Tokenizing and stemming
// internals, HTTP plumbing, the sandbox's launcher and the RAG prompt helpers stay internal.

export { Bm25Index, type Bm25Match, type Bm25Options } from './bm25.js';
export { SANDBOX_WORKSPACE, type SandboxSupport, sandboxSupport } from './bubblewrap.js';
export { calculate } from './calculator.js';
export { type CalculatorToolInput, createCalculatorTool } from './calculator-tool.js';
export { type ChunkOptions, chunkText } from './chunk-text.js';
export { type DefineToolOptions, defineTool, type ToolOutput } from './define-tool.js';
export {
  createOpenAIEmbedder,
  type EmbedFunction,
  type OpenAIEmbedderOptions,
} from './embeddings.js';
export {
  CalculatorError,
  HttpRequestError,
  PythonStartTimeoutError,
  PythonUnavailableError,
  SandboxUnavailableError,
  ToolAbortedError,
  ToolError,
  ToolInputError,
  type ToolInputIssue,
  ToolNotFoundError,
  ToolResultError,
  ToolTimeoutError,
  UrlPolicyError,
  WorkspacePathError,
} from './errors.js';
export {
  createGeneralistTool,
  type GeneralistToolInput,
  type GeneralistToolOptions,
} from './generalist-tool.js';
export {
  createGuardedFetch,
  type GuardedFetch,
  type GuardedFetchOptions,
} from './guarded-fetch.js';
export { type HtmlDocumentText, htmlToText } from './html-to-text.js';
export type { FetchLike } from './http.js';
export {
  LocalCorpus,
  type LocalCorpusOptions,
  loadFlashRagPassages,
  loadHotpotQaPassages,
  type Passage,
} from './local-corpus.js';
export { MediaWikiClient, type MediaWikiClientOptions } from './mediawiki-client.js';
export {
  type EnforcedLimits,
  type LimitEnforcement,
  type PythonIsolation,
  type PythonLimits,
  type PythonRunResult,
  type RunPythonOptions,
  runPython,
} from './python-sandbox.js';
export { createPythonTool, type PythonToolInput, type PythonToolOptions } from './python-tool.js';
export {
  type RetrievalServerOptions,
  RetrievalServerProvider,
  type RetrievedDoc,
} from './retrieval-server-provider.js';
export type {
  SearchHit,
  SearchOptions,
  SearchProvider,
  WikiPage,
  WikipediaBackend,
} from './search.js';
export type { TokenizeOptions } from './text-tokenizer.js';
export {
  failureResult,
  type JsonValue,
  successResult,
  type Tool,
  type ToolContext,
  type ToolExample,
  type ToolMetadata,
  type ToolResult,
} from './tool.js';
export { BUILTIN_TOOL_ALIASES, builtinToolAlias, canonicalToolName } from './tool-names.js';
export {
  type PlannerToolMetadata,
  ToolRegistry,
  type ToolRegistryOptions,
} from './tool-registry.js';
export { checkUrl, type LookupAll, type UrlPolicyOptions } from './url-policy.js';
export { type FetchPageOptions, fetchWebPage, type WebPage } from './web-page.js';
export {
  answerFromWebPage,
  createWebRagTool,
  type WebRagAnswer,
  type WebRagInput,
  type WebRagOptions,
} from './web-rag-tool.js';
export { GoogleCustomSearchProvider, SerperSearchProvider } from './web-search-providers.js';
export {
  createWebSearchTool,
  formatSearchHits,
  type SearchResultStyle,
  type WebSearchToolInput,
  type WebSearchToolOptions,
} from './web-search-tool.js';
export {
  createWikipediaTool,
  type WikipediaToolInput,
  type WikipediaToolOptions,
} from './wikipedia-tool.js';
export { Workspace, type WorkspaceOptions, withWorkspace } from './workspace.js';
export type { SyncLimitReason, WorkspaceSyncReport } from './workspace-sync.js';
