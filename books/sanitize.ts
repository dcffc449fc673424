/**
 * What markup may leave this folder: the allow-list every chapter body passes through (book markup
 * kept; scripts, styles, frames, `on*` handlers and `javascript:` URLs gone), plus the two ways
 * plain text crosses the markup boundary — escaped into it, and read back out of it for titles.
 *
 * The allow-list is applied by walking the tree the reader already parsed and writing out only
 * what it allows, in one pass: no serialising and re-parsing ("Big books stay fast and
 * small": the second parse was most of a MathML book's extraction time). It writes what the
 * sanitize-html configuration it replaces wrote — the same tags, attributes, escaping and `<br />`
 * — with one fix: SVG elements whose names have capitals (`linearGradient`, `clipPath`,
 * `textPath`), which that configuration listed but never matched, are kept.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type ChildNode, isCDATA, isTag, isText } from "domhandler";
import { collapseWhitespace } from "./book.ts";
import { parseMarkup } from "./markup.ts";

// SVG and MathML as books use them ("Text inside SVG dropped… MathML flattened").
// Written in their XML case; chapter markup is parsed as HTML, which lower-cases names (SVG's
// camel-case element names are restored by the parser, attribute names are not), and a browser's
// HTML parser restores the case inside <svg> and <math> (the foreign-content tables).
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
/** Every element may keep these: link targets (`id`) and language and direction. */
const GLOBAL_ATTRIBUTES = ["id", "lang", "dir", "title"];

const lower = (names: string[]): string[] => names.map((name) => name.toLowerCase());

/** How a walk treats a document: which tags and attributes stay, and how names compare. */
interface Policy {
  /** Allowed tag names; compared lower-cased unless `caseSensitive`. */
  tags: ReadonlySet<string>;
  /** Attributes allowed on every allowed tag. */
  global: ReadonlySet<string>;
  /** Further attributes allowed per tag. */
  byTag: ReadonlyMap<string, ReadonlySet<string>>;
  /** Written `<x />`: the void elements. */
  selfClosing: ReadonlySet<string>;
  /** XML: names keep their case, CDATA is text. */
  caseSensitive: boolean;
}

const CHAPTER_HTML: Policy = {
  tags: new Set([
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
  ]),
  // SVG's and MathML's attributes are allowed on every element rather than per tag: they are
  // inert on HTML elements (URL ones are scheme-checked all the same).
  global: new Set([...GLOBAL_ATTRIBUTES, ...lower(SVG_ATTRIBUTES), ...MATHML_ATTRIBUTES]),
  byTag: new Map(
    Object.entries({
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
    }).map(([tag, names]) => [tag, new Set(names)]),
  ),
  // Written as `<br />`, so the output stays well-formed XHTML.
  selfClosing: new Set(["br", "hr", "img", "col", "wbr", "source", "track"]),
  caseSensitive: false,
};

// A standalone SVG file (an image the chapters show) is XML: names keep their case.
const SVG_FILE: Policy = {
  tags: new Set(SVG_TAGS),
  global: new Set([...GLOBAL_ATTRIBUTES, "xml:lang", "xml:space", ...SVG_ATTRIBUTES]),
  byTag: new Map(),
  selfClosing: new Set(),
  caseSensitive: true,
};

/**
 * Dropped with everything inside them: code, styling, form and frame fallbacks, the document
 * head, and a MathML annotation that may hold HTML. Other tags that are not allowed are dropped
 * but their content stays.
 */
const DROPPED_WITH_CONTENT: ReadonlySet<string> = new Set([
  ...["script", "style", "noscript", "template", "textarea", "option", "select"],
  ...["iframe", "object", "head", "annotation-xml"],
]);

/**
 * Allowed attributes that mean nothing without a value (HTML's non-boolean attributes): an empty
 * one is dropped. Other empty attributes are written bare (`controls`), `alt` as `alt=""`.
 */
const DROPPED_WHEN_EMPTY: ReadonlySet<string> = new Set([
  ...["cite", "color", "colspan", "datetime", "dir", "form", "headers", "height", "href", "id"],
  ...["kind", "label", "lang", "media", "poster", "rowspan", "scope", "span", "src", "srclang"],
  ...["start", "title", "type", "value", "width"],
]);

/** Attributes holding a URL: kept only without a scheme, or with one of `ALLOWED_SCHEMES`. */
const URL_ATTRIBUTES: ReadonlySet<string> = new Set([
  ...["href", "src", "cite", "xlink:href", "poster"],
]);

/**
 * Relative URLs (another chapter, an image written beside the chapters) stay; `javascript:`,
 * `data:` and every other scheme go, and so do protocol-relative URLs (`//host/x`).
 */
const ALLOWED_SCHEMES: ReadonlySet<string> = new Set(["http", "https", "mailto"]);

/** Where foreign content (SVG, MathML) turns back to HTML, as the HTML parser has it. */
const INTEGRATION_POINTS: ReadonlySet<string> = new Set([
  ...["mi", "mo", "mn", "ms", "mtext", "annotation-xml", "foreignobject", "desc", "title"],
]);

/** What a reader sees in an element: it counts when deciding whether a chapter is blank. */
const MEDIA: ReadonlySet<string> = new Set(["img", "svg", "math", "video", "audio", "image"]);

/** Sanitised chapter markup, and whether a reader would see anything in it. */
export interface SanitizedHtml {
  /** A fragment with only allow-listed tags and attributes, trimmed. */
  html: string;
  /** `true` when it shows nothing: no text, image, drawing, formula or media. */
  blank: boolean;
}

/**
 * Sanitise parsed chapter nodes down to the book allow-list, in one walk of the tree.
 *
 * @param nodes a run of sibling or cousin nodes in document order, as `parseMarkup` (HTML mode)
 *   built them; they are read, not changed.
 * @param wrapper an element to wrap the result in (its attributes go through the allow-list
 *   too), e.g. a `<div lang>`; `null` for none.
 * @returns the sanitised fragment and whether it is blank.
 */
export function sanitizeNodes(
  nodes: readonly ChildNode[],
  wrapper: { name: string; attribs: Record<string, string> } | null = null,
): SanitizedHtml {
  const writer = new Writer(CHAPTER_HTML);
  if (wrapper === null) writer.children(nodes, false);
  else writer.element(wrapper.name, wrapper.attribs, nodes, false);
  return { html: writer.out.trim(), blank: !writer.seen };
}

/**
 * Sanitise untrusted chapter markup down to the book allow-list.
 *
 * @param html an HTML or XHTML fragment from a book file or rendered Markdown.
 * @returns the sanitised fragment (see `sanitizeNodes`) and whether it is blank.
 * @throws RangeError when elements nest too deeply (see `books/markup.ts`).
 */
export function sanitizeChapterHtml(html: string): SanitizedHtml {
  return sanitizeNodes(parseMarkup(html).children);
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
  const writer = new Writer(SVG_FILE);
  writer.children(parseMarkup(source, { xmlMode: true }).children, true);
  return `<?xml version="1.0" encoding="UTF-8"?>\n${writer.out.trim()}\n`;
}

/** What the policy does with one tag name: worked out once per name, then looked up. */
interface TagRule {
  /** Written with its allowed attributes; or dropped, its content kept (`unwrap`) or not. */
  action: "keep" | "unwrap" | "drop";
  /** The foreign context inside it: `true` in SVG/MathML, `false` at an integration point. */
  foreign: boolean | null;
  /** Whether writing it shows something (an image, a drawing, a formula, media). */
  media: boolean;
  selfClosing: boolean;
  /** Attributes allowed on it besides the global ones. */
  attributes: ReadonlySet<string> | undefined;
}

const RULES = new WeakMap<Policy, Map<string, TagRule>>();

function ruleFor(policy: Policy, name: string): TagRule {
  let rules = RULES.get(policy);
  if (rules === undefined) RULES.set(policy, rules = new Map());
  let rule = rules.get(name);
  if (rule === undefined) {
    const key = policy.caseSensitive ? name : name.toLowerCase();
    const folded = name.toLowerCase();
    rule = {
      action: policy.tags.has(key) ? "keep" : DROPPED_WITH_CONTENT.has(key) ? "drop" : "unwrap",
      foreign: folded === "svg" || folded === "math"
        ? true
        : INTEGRATION_POINTS.has(folded)
        ? false
        : null,
      media: MEDIA.has(folded),
      selfClosing: policy.selfClosing.has(key),
      attributes: policy.byTag.get(key),
    };
    rules.set(name, rule);
  }
  return rule;
}

/** One walk: the markup written so far, and whether anything visible was written. */
class Writer {
  out = "";
  /** Whether visible text or a media element has been written. */
  seen = false;
  readonly #policy: Policy;

  constructor(policy: Policy) {
    this.#policy = policy;
  }

  /**
   * Write nodes. `foreign`: inside SVG or MathML, where (in HTML) a CDATA section is text; outside
   * it, HTML reads one as a comment and it is dropped.
   */
  children(nodes: readonly ChildNode[], foreign: boolean): void {
    for (const node of nodes) {
      if (isText(node)) {
        this.out += escapeMarkup(node.data, false);
        if (!this.seen && /\S/.test(node.data)) this.seen = true;
      } else if (isTag(node)) {
        const rule = ruleFor(this.#policy, node.name);
        if (rule.action === "keep") {
          this.#write(node.name, rule, node.attribs, node.children, foreign);
        } else if (rule.action === "unwrap") {
          // The tag goes, its content stays; the parser's foreign context still follows the tag.
          this.children(node.children, rule.foreign ?? foreign);
        }
      } else if (isCDATA(node) && (foreign || this.#policy.caseSensitive)) {
        this.children(node.children, foreign);
      }
      // Comments, processing instructions and doctypes are dropped.
    }
  }

  /** Write an element as if it were allowed, e.g. a wrapper the caller adds. */
  element(
    name: string,
    attribs: Record<string, string>,
    children: readonly ChildNode[],
    foreign: boolean,
  ): void {
    this.#write(name, ruleFor(this.#policy, name), attribs, children, foreign);
  }

  #write(
    name: string,
    rule: TagRule,
    attribs: Record<string, string>,
    children: readonly ChildNode[],
    foreign: boolean,
  ): void {
    this.out += `<${name}${this.#attributes(rule, attribs)}`;
    if (rule.media) this.seen = true;
    if (rule.selfClosing) {
      this.out += " />";
      this.children(children, rule.foreign ?? foreign);
      return;
    }
    this.out += ">";
    this.children(children, rule.foreign ?? foreign);
    this.out += `</${name}>`;
  }

  #attributes(rule: TagRule, attribs: Record<string, string>): string {
    let out = "";
    for (const name in attribs) {
      if (!this.#policy.global.has(name) && rule.attributes?.has(name) !== true) continue;
      const value = attribs[name];
      if (value === "") {
        if (name === "alt") out += ' alt=""';
        else if (!DROPPED_WHEN_EMPTY.has(name)) out += ` ${name}`;
        continue;
      }
      if (URL_ATTRIBUTES.has(name) && !isSafeUrl(value)) continue;
      out += ` ${name}="${escapeMarkup(value, true)}"`;
    }
    return out;
  }
}

/**
 * Whether a URL may stay: no scheme, or an allowed one, once the characters browsers ignore in a
 * URL (controls and spaces, `<!-- -->` comments) are taken out — the trick `java&#9;script:`
 * relies on.
 */
function isSafeUrl(value: string): boolean {
  // deno-lint-ignore no-control-regex
  let url = value.replace(/[\x00-\x20]+/g, "");
  for (let start = url.indexOf("<!--"); start !== -1; start = url.indexOf("<!--")) {
    const end = url.indexOf("-->", start + 4);
    if (end === -1) break;
    url = url.slice(0, start) + url.slice(end + 3);
  }
  const scheme = /^([a-zA-Z][a-zA-Z0-9.\-+]*):/.exec(url);
  if (scheme === null) return !/^[/\\]{2}/.test(url);
  return ALLOWED_SCHEMES.has(scheme[1].toLowerCase());
}

/** `&`, `<`, `>` (and in an attribute value `"`) as entities; the rest as is. */
function escapeMarkup(text: string, attribute: boolean): string {
  if (!(attribute ? /[&<>"]/ : /[&<>]/).test(text)) return text;
  const escaped = text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
  return attribute ? escaped.replaceAll('"', "&quot;") : escaped;
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
