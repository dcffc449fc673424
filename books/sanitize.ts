/**
 * What markup may leave this folder: the allow-list every chapter body passes through (book markup
 * kept; scripts, styles, frames, `on*` handlers and `javascript:` URLs gone), plus the two ways
 * plain text crosses the markup boundary — escaped into it, and read back out of it for titles.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import sanitizeHtmlUntyped from "sanitize-html";
import { collapseWhitespace } from "./book.ts";
import { nestingGuard, parseMarkup } from "./markup.ts";

/** The part of sanitize-html's options this module sets (the package ships no types). */
interface SanitizeOptions {
  allowedTags: string[];
  allowedAttributes: Record<string, string[]>;
  allowedSchemes: string[];
  allowedSchemesByTag?: Record<string, string[]>;
  allowProtocolRelative: boolean;
  selfClosing: string[];
  nonTextTags: string[];
  disallowedTagsMode: "discard";
  parser?: { xmlMode?: boolean; lowerCaseTags?: boolean; lowerCaseAttributeNames?: boolean };
  onOpenTag?: () => void;
  onCloseTag?: () => void;
}

const sanitizeHtml: (dirty: string, options: SanitizeOptions) => string = sanitizeHtmlUntyped;

// SVG and MathML as books use them (issue 10: "Text inside SVG dropped… MathML flattened").
// Written in their XML case; chapter markup is parsed as HTML, which lower-cases names, and a
// browser's HTML parser restores the case inside <svg> and <math> (the foreign-content tables).
// Left out on purpose: <script>, <style>, <foreignObject> (HTML inside SVG), <animate>/<set>
// (they can retarget an href after sanitising), <annotation-xml> (may hold HTML).
const SVG_TAGS = [
  ...["svg", "g", "defs", "symbol", "use", "title", "desc", "switch"],
  ...["path", "rect", "circle", "ellipse", "line", "polyline", "polygon", "image"],
  ...["text", "tspan", "textPath", "a", "marker", "pattern", "clipPath", "mask"],
  ...["linearGradient", "radialGradient", "stop", "filter", "feGaussianBlur", "feOffset"],
  ...["feBlend", "feColorMatrix", "feFlood", "feComposite", "feMerge", "feMergeNode"],
];
const SVG_ATTRIBUTES = [
  ...["xmlns", "xmlns:xlink", "version", "viewBox", "preserveAspectRatio", "width", "height"],
  ...["x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "fx", "fy", "d", "points"],
  ...["dx", "dy", "rotate", "textLength", "lengthAdjust", "startOffset", "transform"],
  ...["href", "xlink:href", "xlink:title", "fill", "fill-opacity", "fill-rule", "stroke"],
  ...["stroke-width", "stroke-opacity", "stroke-linecap", "stroke-linejoin", "stroke-dasharray"],
  ...["stroke-miterlimit", "opacity", "font-family", "font-size", "font-style", "font-weight"],
  ...["text-anchor", "dominant-baseline", "letter-spacing", "word-spacing", "writing-mode"],
  ...["clip-path", "clip-rule", "mask", "filter", "visibility", "display", "color"],
  ...["gradientUnits", "gradientTransform", "spreadMethod", "offset", "stop-color"],
  ...["stop-opacity", "patternUnits", "patternContentUnits", "patternTransform"],
  ...["markerWidth", "markerHeight", "refX", "refY", "orient", "markerUnits", "clipPathUnits"],
  ...["maskUnits", "maskContentUnits", "filterUnits", "primitiveUnits", "stdDeviation", "in"],
  ...["in2", "result", "mode", "type", "values", "operator", "k1", "k2", "k3", "k4"],
  ...["flood-color", "flood-opacity", "marker-start", "marker-mid", "marker-end"],
  ...["requiredFeatures", "systemLanguage"],
];
const MATHML_TAGS = [
  ...["math", "semantics", "annotation", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace"],
  ...["msup", "msub", "msubsup", "mfrac", "msqrt", "mroot", "mstyle", "merror", "mpadded"],
  ...["mphantom", "mfenced", "menclose", "mtable", "mtr", "mtd", "mlabeledtr", "munder"],
  ...["mover", "munderover", "mmultiscripts", "mprescripts", "none", "maligngroup"],
  ...["malignmark", "mglyph"],
];
const MATHML_ATTRIBUTES = [
  ...["xmlns", "display", "mathvariant", "mathsize", "mathcolor", "mathbackground", "dir"],
  ...["fence", "separator", "stretchy", "symmetric", "largeop", "movablelimits", "accent"],
  ...["accentunder", "lspace", "rspace", "minsize", "maxsize", "linethickness", "scriptlevel"],
  ...["displaystyle", "columnalign", "rowalign", "columnspan", "rowspan", "columnlines"],
  ...["rowlines", "frame", "columnspacing", "rowspacing", "notation", "open", "close"],
  ...["separators", "width", "height", "depth", "voffset", "encoding", "numalign", "denomalign"],
  ...["bevelled", "form", "alttext", "altimg"],
];
/** Every element may keep these: link targets (`id`) and language and direction (issue 10). */
const GLOBAL_ATTRIBUTES = ["id", "lang", "dir", "title"];

const lower = (names: string[]): string[] => names.map((name) => name.toLowerCase());

const CHAPTER_HTML: SanitizeOptions = {
  allowedTags: [
    ...["p", "div", "span", "br", "hr", "blockquote", "pre", "code", "wbr"],
    ...["h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "header", "footer", "section"],
    ...["article", "aside", "nav", "main", "address", "details", "summary"],
    ...["em", "strong", "i", "b", "u", "s", "small", "sup", "sub", "cite", "q", "abbr"],
    ...["mark", "del", "ins", "var", "kbd", "samp", "dfn", "bdi", "bdo", "time", "big"],
    ...["ruby", "rb", "rt", "rp", "rtc"],
    ...["a", "img", "figure", "figcaption", "picture", "source", "audio", "video", "track"],
    ...["ul", "ol", "li", "dl", "dt", "dd"],
    ...["table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "th", "td"],
    ...lower(SVG_TAGS),
    ...MATHML_TAGS,
  ],
  allowedAttributes: {
    // SVG's and MathML's attributes are allowed on every element rather than per tag: they are
    // inert on HTML elements (URL ones are scheme-checked all the same), and sanitize-html
    // rebuilds its attribute tables on every call, so a 100-tag × 80-attribute table cost ~4 ms
    // per chapter, most of the 18 s a 2,014-chapter EPUB took (issue 10).
    "*": [...new Set([...GLOBAL_ATTRIBUTES, ...lower(SVG_ATTRIBUTES), ...MATHML_ATTRIBUTES])],
    a: ["href"],
    img: ["src", "alt", "width", "height"],
    source: ["src", "type", "media"],
    audio: ["src", "controls"],
    video: ["src", "controls", "poster", "width", "height"],
    track: ["src", "kind", "srclang", "label"],
    ol: ["start", "reversed", "type"],
    li: ["value"],
    blockquote: ["cite"],
    q: ["cite"],
    time: ["datetime"],
    col: ["span"],
    colgroup: ["span"],
    th: ["colspan", "rowspan", "scope", "headers"],
    td: ["colspan", "rowspan", "headers"],
  },
  // Relative URLs (another chapter, an image written beside the chapters) stay; `javascript:`
  // and `data:` go (sanitize-html checks href, src, xlink:href, poster and the rest).
  allowedSchemes: ["http", "https", "mailto"],
  allowProtocolRelative: false,
  // Written as `<br />`, so the output stays well-formed XHTML.
  selfClosing: ["br", "hr", "img", "col", "wbr", "source", "track"],
  // Dropped with their text: code, styling, form and frame fallbacks, the document head, and a
  // MathML annotation that may hold HTML.
  nonTextTags: [
    ...["script", "style", "noscript", "template", "textarea", "option", "select"],
    ...["iframe", "object", "head", "annotation-xml"],
  ],
  disallowedTagsMode: "discard",
};

// A standalone SVG file (an image the chapters show) is XML: names keep their case.
const SVG_FILE: SanitizeOptions = {
  ...CHAPTER_HTML,
  allowedTags: SVG_TAGS,
  allowedAttributes: Object.fromEntries(
    SVG_TAGS.map((
      tag,
    ) => [tag, [...GLOBAL_ATTRIBUTES, "xml:lang", "xml:space", ...SVG_ATTRIBUTES]]),
  ),
  selfClosing: [],
  parser: { xmlMode: true },
};

/**
 * Sanitise untrusted chapter markup down to the book allow-list.
 *
 * @param html an HTML or XHTML fragment from a book file or rendered Markdown.
 * @returns a well-formed XHTML fragment with only allow-listed tags and attributes.
 * @throws RangeError when elements nest too deeply (see `books/markup.ts`): rendered Markdown
 *   reaches here without a tree, and sanitize-html's parser has the same quadratic nesting cost.
 */
export function sanitizeChapterHtml(html: string): string {
  return sanitizeHtml(html, { ...CHAPTER_HTML, ...nestingGuard() }).trim();
}

/**
 * Sanitise a standalone SVG file (an image a chapter shows, written beside it) down to the SVG
 * part of the allow-list, in XML mode so its names keep their case.
 *
 * @param source the SVG file's text.
 * @returns an SVG document without scripts, handlers, styles or `javascript:` URLs.
 * @throws RangeError when elements nest too deeply (see `books/markup.ts`).
 */
export function sanitizeSvgFile(source: string): string {
  const body = sanitizeHtml(source, { ...SVG_FILE, ...nestingGuard() }).trim();
  return `<?xml version="1.0" encoding="UTF-8"?>\n${body}\n`;
}

/**
 * Escape plain text for use as HTML element content or a quoted attribute value.
 *
 * @param text plain text.
 * @returns the text with `&`, `<`, `>`, `"` and `'` escaped.
 */
export function escapeHtml(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/**
 * Read the plain text out of an HTML fragment, entities decoded and whitespace collapsed.
 *
 * @param html an HTML fragment, e.g. a rendered heading.
 * @returns its text content on one line; `""` when it has none.
 * @throws RangeError when elements nest too deeply (see `books/markup.ts`).
 */
export function htmlText(html: string): string {
  return collapseWhitespace(DomUtils.textContent(parseMarkup(html)));
}

/**
 * Whether sanitised chapter markup shows nothing: no text and no image.
 *
 * @param html a fragment from `sanitizeChapterHtml`.
 * @returns `true` when a reader would see an empty page: no text, image, drawing, formula or media.
 */
export function isBlankHtml(html: string): boolean {
  return htmlText(html) === "" && !/<(img|svg|math|video|audio|image)\b/i.test(html);
}
