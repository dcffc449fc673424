/**
 * HTML books, and the HTML page reading the EPUB reader shares: parsing a page (XHTML quirks
 * included), its `<title>`, author `<meta>` and body, taking a heading out as a title, and turning
 * nodes into sanitised chapter markup. Reading a whole HTML book into chapters is
 * `html_book.ts`.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import type { ChildNode } from "domhandler";
import { collapseWhitespace } from "./book.ts";
import { parseMarkup } from "./markup.ts";
import { type SanitizedHtml, sanitizeNodes } from "./sanitize.ts";

/** A parsed HTML or XHTML page: what the book readers need from it. */
export interface HtmlPage {
  /** Text of `<title>`, or `null` when it is missing or blank. */
  title: string | null;
  /** `content` of `<meta name="author">`, or `null` when it is missing or blank. */
  author: string | null;
  /** The body's child nodes, live: removing a node from the tree removes it here too. */
  body: ChildNode[];
}

/**
 * Parse an HTML or XHTML page.
 *
 * Parsed as HTML (forgiving of the invalid XML common in EPUBs, e.g. `&nbsp;`), but with `<x/>`
 * read as self-closing and CDATA recognised, as XHTML means them; otherwise an XHTML `<title/>`
 * would swallow the rest of the page.
 *
 * @param source the page's markup.
 * @returns its title, author and body nodes (the whole document when there is no `<body>`).
 * @throws RangeError when elements nest too deeply (see `books/markup.ts`).
 */
export function parseHtmlPage(source: string): HtmlPage {
  const document = parseMarkup(source, { recognizeSelfClosing: true, recognizeCDATA: true });
  const titleElement = DomUtils.findOne((element) => element.name === "title", document.children);
  const meta = DomUtils.findOne(
    (element) => element.name === "meta" && element.attribs.name?.toLowerCase() === "author",
    document.children,
  );
  const body = DomUtils.findOne((element) => element.name === "body", document.children);
  return {
    title: (titleElement && collapseWhitespace(DomUtils.textContent(titleElement))) || null,
    author: (meta && collapseWhitespace(meta.attribs.content ?? "")) || null,
    body: (body ?? document).children,
  };
}

/**
 * Take the first element with one of `names` (in document order) out of the tree.
 *
 * @param nodes where to search, recursively.
 * @param names lower-case tag names, e.g. `["h1", "h2", "h3"]`.
 * @returns the removed element's plain text (may be `""`), or `null` when there is none.
 */
export function takeFirstElement(nodes: ChildNode[], names: readonly string[]): string | null {
  const element = DomUtils.findOne((candidate) => names.includes(candidate.name), nodes);
  if (element === null) return null;
  DomUtils.removeElement(element);
  return collapseWhitespace(DomUtils.textContent(element));
}

/**
 * Sanitise nodes into chapter markup, straight from the tree (see `sanitizeNodes`).
 *
 * @param nodes a run of sibling or cousin nodes, in document order.
 * @returns the sanitised fragment and whether it shows nothing.
 */
export function renderChapterHtml(nodes: ChildNode[]): SanitizedHtml {
  return sanitizeNodes(nodes);
}
