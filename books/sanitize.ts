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
  allowProtocolRelative: boolean;
  selfClosing: string[];
  nonTextTags: string[];
  disallowedTagsMode: "discard";
  onOpenTag?: () => void;
  onCloseTag?: () => void;
}

const sanitizeHtml: (dirty: string, options: SanitizeOptions) => string = sanitizeHtmlUntyped;

const CHAPTER_HTML: SanitizeOptions = {
  allowedTags: [
    ...["p", "div", "span", "br", "hr", "blockquote", "pre", "code"],
    ...["h1", "h2", "h3", "h4", "h5", "h6"],
    ...["em", "strong", "i", "b", "u", "s", "small", "sup", "sub", "cite", "q", "abbr"],
    ...["a", "img", "figure", "figcaption"],
    ...["ul", "ol", "li", "dl", "dt", "dd"],
    ...["table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "th", "td"],
  ],
  allowedAttributes: {
    a: ["href", "title"],
    img: ["src", "alt", "title"],
    ol: ["start"],
    col: ["span"],
    colgroup: ["span"],
    th: ["colspan", "rowspan", "scope"],
    td: ["colspan", "rowspan"],
  },
  // Relative URLs (another chapter, an image inside the EPUB) stay; `javascript:` and `data:` go.
  allowedSchemes: ["http", "https", "mailto"],
  allowProtocolRelative: false,
  // Written as `<br />`, so the output stays well-formed XHTML.
  selfClosing: ["br", "hr", "img", "col"],
  // Dropped with their text: code, styling, form and frame fallbacks, and SVG (cover art whose
  // <text> would otherwise leak into the chapter as stray words).
  nonTextTags: [
    ...["script", "style", "noscript", "template", "textarea", "option", "select"],
    ...["iframe", "object", "svg", "title", "head"],
  ],
  disallowedTagsMode: "discard",
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
 * @returns `true` when a reader would see an empty page.
 */
export function isBlankHtml(html: string): boolean {
  return htmlText(html) === "" && !/<img\b/i.test(html);
}
