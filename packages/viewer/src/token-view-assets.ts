import { readFileSync } from 'node:fs';
import { staticPath } from './static-files.js';

// The token view's stylesheet and colouring script (static/tokens.css, static/tokens.js), for a
// page that embeds trajectoryHtml without the viewer's server: report.html inlines them, so the
// report stays one self-contained file.

/** static/tokens.css and static/tokens.js as text. */
export function tokenViewAssets(): { css: string; js: string } {
  return {
    css: readFileSync(staticPath('tokens.css'), 'utf8'),
    js: readFileSync(staticPath('tokens.js'), 'utf8'),
  };
}
