// @flowgrpo/viewer: `flowgrpo view`, a local read-only web app on a run directory (curves with
// the alarms marked, steps, token-level rollouts), and the token-level trajectory HTML that
// report.html embeds.
export { type MetricsRecord, type RolloutFile, RunReader } from './run-reader.js';
export { startViewer, type Viewer, type ViewerOptions } from './server.js';
export { type TokenPieces, tokenPieces } from './token-pieces.js';
export { tokenViewAssets } from './token-view-assets.js';
export {
  escapeHtml,
  trajectoryError,
  trajectoryHtml,
  trajectoryRoles,
} from './trajectory-html.js';
