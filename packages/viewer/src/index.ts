// @flowgrpo/viewer: `flowgrpo view`, a local read-only web app on a run directory (curves with
// the alarm episodes marked, steps, token-level rollouts), and what report.html shares with it:
// the token-level trajectory HTML, the charts, the alarm episodes, the stop reasons explained,
// the final answer as shown, and how a run's metrics lines and tokenizer are read.
export {
  ALARM_GUIDE,
  type AlarmEpisode,
  type AlarmGuide,
  alarmEpisodes,
  episodeCharts,
} from './alarm-episodes.js';
export { CHARTS, type ChartSpec, chartSpecs, failureCodes } from './charts.js';
export { type DisplayAnswer, displayAnswer } from './final-answer.js';
export {
  isMetricsRecord,
  type MetricsLines,
  type MetricsRecord,
  parseMetricsLines,
} from './metrics-lines.js';
export { type RolloutFile, RunReader } from './run-reader.js';
export { findRunTokenizer, type TokenizerLookup, type TokenizerTried } from './run-tokenizer.js';
export { startViewer, type Viewer, type ViewerOptions } from './server.js';
export {
  STOP_REASONS,
  type StopReasonHelp,
  stopReasonHelp,
  stopReasonTitle,
} from './stop-reasons.js';
export { type TokenPieces, tokenPieces } from './token-pieces.js';
export { tokenViewAssets } from './token-view-assets.js';
export {
  escapeHtml,
  trajectoryError,
  trajectoryHtml,
  trajectoryRoles,
} from './trajectory-html.js';
