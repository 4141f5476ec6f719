// A small HTML → text converter for web pages fed to RAG: drops scripts, styles and other
// non-content elements, turns block elements into line breaks and decodes entities. It is a
// tokenizer over tags, not a DOM parser; malformed markup degrades to slightly noisier text.

const NAMED_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  ensp: ' ',
  emsp: ' ',
  thinsp: ' ',
  shy: '',
  copy: '©',
  reg: '®',
  trade: '™',
  mdash: '—',
  ndash: '–',
  hellip: '…',
  lsquo: '‘',
  rsquo: '’',
  sbquo: '‚',
  ldquo: '“',
  rdquo: '”',
  bdquo: '„',
  laquo: '«',
  raquo: '»',
  times: '×',
  divide: '÷',
  minus: '−',
  plusmn: '±',
  deg: '°',
  middot: '·',
  bull: '•',
  euro: '€',
  pound: '£',
  yen: '¥',
  cent: '¢',
  sect: '§',
  para: '¶',
  frac12: '½',
  frac14: '¼',
  frac34: '¾',
  sup2: '²',
  sup3: '³',
  micro: 'µ',
  eacute: 'é',
  egrave: 'è',
  aacute: 'á',
  agrave: 'à',
  iacute: 'í',
  oacute: 'ó',
  uacute: 'ú',
  ntilde: 'ñ',
  ouml: 'ö',
  uuml: 'ü',
  auml: 'ä',
  szlig: 'ß',
  ccedil: 'ç',
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z][a-z0-9]*);?/gi, (match, body: string) => {
    if (body[0] === '#') {
      const code =
        body[1] === 'x' || body[1] === 'X'
          ? Number.parseInt(body.slice(2), 16)
          : Number.parseInt(body.slice(1), 10);
      if (
        !Number.isFinite(code) ||
        code <= 0 ||
        code > 0x10ffff ||
        (code >= 0xd800 && code <= 0xdfff)
      ) {
        return '\uFFFD';
      }
      return String.fromCodePoint(code);
    }
    const named = NAMED_ENTITIES[body] ?? NAMED_ENTITIES[body.toLowerCase()];
    return named ?? match;
  });
}

const DROP_ELEMENTS = [
  'script',
  'style',
  'noscript',
  'template',
  'svg',
  'iframe',
  'object',
  'canvas',
  'head',
];
const BLOCK_ELEMENTS = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'body',
  'br',
  'caption',
  'dd',
  'details',
  'dialog',
  'div',
  'dl',
  'dt',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'form',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'html',
  'li',
  'main',
  'nav',
  'ol',
  'p',
  'pre',
  'section',
  'summary',
  'table',
  'tbody',
  'tfoot',
  'thead',
  'tr',
  'ul',
]);

export interface HtmlDocumentText {
  title: string;
  text: string;
}

/** The page's `<title>` and its readable text. */
export function htmlToText(html: string): HtmlDocumentText {
  // Every pattern below that scans for a closing delimiter also accepts the end of the text
  // (`|$`): without it, a page of 100,000 unclosed `<a` or `<![CDATA[` made each start scan to the
  // end — quadratic, hours for a 2 MiB page, with the event loop blocked and no timeout able to
  // fire. An unclosed construct now runs to the end of the page (dropped, like a comment).
  const titleMatch = /<title[^>]*(?:>|$)([\s\S]*?)(<\/title\s*>|$)/i.exec(html);
  const title = titleMatch?.[2] ? decodeEntities(titleMatch[1]!).replace(/\s+/g, ' ').trim() : '';
  let s = html
    .replace(/<!--[\s\S]*?(?:-->|$)/g, ' ')
    .replace(/<!\[CDATA\[[\s\S]*?(?:\]\]>|$)/g, ' ');
  for (const tag of DROP_ELEMENTS) {
    s = s.replace(new RegExp(`<${tag}\\b[^>]*(?:>|$)[\\s\\S]*?(?:</${tag}\\s*>|$)`, 'gi'), ' ');
  }
  s = s.replace(/<!doctype[^>]*(?:>|$)/gi, ' ');
  s = s.replace(
    // A lone quote is text too (`["']`), so the scan never fails part-way and backtracks.
    /<\/?([a-zA-Z][a-zA-Z0-9-]*)\b(?:[^>"']|"[^"]*"|'[^']*'|["'])*(?:>|$)/g,
    (_m, name: string) => {
      const tag = name.toLowerCase();
      if (tag === 'li') return '\n- ';
      if (tag === 'td' || tag === 'th') return '\t';
      return BLOCK_ELEMENTS.has(tag) ? '\n' : '';
    },
  );
  // Tag-like text left over (a bare "<" not followed by a letter, as in "3 < 5") stays as written.
  const text = decodeEntities(s)
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line) => line.replace(/[ \t\f\v\u00a0]+/g, ' ').trim())
    .join('\n')
    .replace(/\n(?:- )?\n(?=- )/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  return { title, text };
}
