import { readFileSync } from 'node:fs';

// The token view's stylesheet and colouring script (static/tokens.css, static/tokens.js), for a
// page that embeds trajectoryHtml without the viewer's server: report.html inlines them, so the
// report stays one self-contained file.

/** static/tokens.css and static/tokens.js as text. */
export function tokenViewAssets(): { css: string; js: string } {
  const read = (name: string) =>
    readFileSync(new URL(`../static/${name}`, import.meta.url), 'utf8');
  return { css: read('tokens.css'), js: read('tokens.js') };
}
