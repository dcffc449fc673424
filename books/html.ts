/**
 * HTML books, and the HTML page reading the EPUB reader shares: parsing a page (XHTML quirks
 * included), its `<title>`, author `<meta>` and body, taking a heading out as a title, and turning
 * nodes into sanitised chapter markup. An HTML book splits into chapters at `h1`/`h2` elements in
 * document order, wherever they are nested.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type ChildNode, type Element, isTag } from "domhandler";
import { render } from "dom-serializer";
import { collapseWhitespace, type ExtractedBook, type ExtractedChapter, fileStem } from "./book.ts";
import { parseMarkup } from "./markup.ts";
import { isBlankHtml, sanitizeChapterHtml } from "./sanitize.ts";
import { parseByline } from "./text.ts";

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
 * Serialise nodes and sanitise them into chapter markup.
 *
 * @param nodes a run of sibling or cousin nodes, in document order.
 * @returns a sanitised XHTML fragment (see `sanitizeChapterHtml`).
 */
export function renderChapterHtml(nodes: ChildNode[]): string {
  return sanitizeChapterHtml(render(nodes));
}

/**
 * Read an HTML book into chapters split at its `h1` and `h2` elements.
 *
 * When there is exactly one `h1` and it comes before every `h2`, it is the book's title heading:
 * it is left out and the chapters split at `h2` only. Content before the first split heading is a
 * chapter titled like the book, less a leading `by X` byline; a section with nothing to show under
 * its heading (a title page, a contents entry) is skipped. Title: `<title>`, else the first `h1`,
 * else the file name's stem. Author: `<meta name="author">`, else that byline, else `null`.
 *
 * @param source the decoded file text.
 * @param path the file's path (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book; `chapters` may be empty, which the caller rejects.
 */
export function extractHtml(source: string, path: string, signal: AbortSignal): ExtractedBook {
  const page = parseHtmlPage(source);
  const h1s = DomUtils.findAll((element) => element.name === "h1", page.body);
  const firstSplit = DomUtils.findOne(
    (element) => element.name === "h1" || element.name === "h2",
    page.body,
  );
  const firstH1Text = h1s.length > 0 ? collapseWhitespace(DomUtils.textContent(h1s[0])) : "";
  const title = page.title || firstH1Text || fileStem(path);
  const titleOnly = h1s.length === 1 && firstSplit === h1s[0];
  if (titleOnly) DomUtils.removeElement(h1s[0]);
  const splitNames = titleOnly ? ["h2"] : ["h1", "h2"];

  const sections = splitAtHeadings(page.body, (element) => splitNames.includes(element.name));
  // Taken out even when <meta> names the author: it is title-page furniture, not a chapter.
  const byline = takeByline(sections[0].nodes);
  const author = page.author ?? byline;

  const chapters: ExtractedChapter[] = [];
  for (const section of sections) {
    signal.throwIfAborted();
    const html = renderChapterHtml(section.nodes);
    if (isBlankHtml(html)) continue;
    const heading = section.heading === null
      ? title
      : collapseWhitespace(DomUtils.textContent(section.heading));
    chapters.push({ title: heading || `Chapter ${chapters.length + 1}`, html });
  }
  return { format: "html", title, author, chapters };
}

interface Section {
  /** The heading that opens the section; `null` for what comes before the first one. */
  heading: Element | null;
  nodes: ChildNode[];
}

/**
 * Cut the nodes into sections at each split heading, in document order. A split heading nested in
 * a wrapper (`<section>`, `<div>`) splits the wrapper's children; the wrapper itself is dropped,
 * since its two halves now belong to different chapters.
 */
function splitAtHeadings(nodes: ChildNode[], isSplit: (element: Element) => boolean): Section[] {
  const sections: Section[] = [{ heading: null, nodes: [] }];
  const visit = (children: ChildNode[]): void => {
    for (const node of children) {
      if (isTag(node) && isSplit(node)) {
        sections.push({ heading: node, nodes: [] });
      } else if (isTag(node) && DomUtils.existsOne(isSplit, node.children)) {
        visit(node.children);
      } else {
        sections[sections.length - 1].nodes.push(node);
      }
    }
  };
  visit(nodes);
  return sections;
}

/** Take the front matter's first paragraph out when it is a `by X` byline; return the name. */
function takeByline(nodes: ChildNode[]): string | null {
  const first = DomUtils.findOne((element) => element.name === "p", nodes);
  const name = first === null ? null : parseByline(DomUtils.textContent(first));
  if (first === null || name === null) return null;
  DomUtils.removeElement(first);
  // `nodes` is a section's own list: a top-level paragraph must leave it as well as the tree.
  const index = nodes.indexOf(first);
  if (index !== -1) nodes.splice(index, 1);
  return name;
}
