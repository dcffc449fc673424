/**
 * One EPUB content document (XHTML, or an SVG page) into a chapter: its title — the navigation's
 * label, else its first top-ranked heading (`hgroup` parts joined by ": "), else its `<title>`
 * unless that only repeats the book's title ("EPUB chapter titles taken from the first
 * heading only"; "fixed-layout books with the book title on every chapter") or is Project
 * Gutenberg's "The Project Gutenberg eBook of X, by Y" — the heading taken
 * out of the body, its links rewritten (`epub_links.ts`), its own `lang`/`dir` kept on a wrapper,
 * and its nodes sanitised straight from the tree (`sanitize.ts`).
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type ChildNode, Element, isTag } from "domhandler";
import { collapseWhitespace } from "./book.ts";
import { type LinkRewriter, removeKeepingIds } from "./epub_links.ts";
import { type EpubFrame, isGutenbergBookTitle } from "./epub_gutenberg.ts";
import type { NavEntry } from "./epub_nav.ts";
import { type DocumentPart, splitAtNav } from "./epub_split.ts";
import { parseMarkup } from "./markup.ts";
import { type SanitizedHtml, sanitizeNodes } from "./sanitize.ts";

/**
 * Render one content document into a chapter.
 *
 * @param source the document's decoded text.
 * @param page what it is shown as (`"xhtml"` or `"svg"`) and its canonical archive path.
 * @param label the navigation's label for it, or `null`.
 * @param bookTitle the book's title: a `<title>` that only repeats it is no chapter title.
 * @param bookLanguage the book's language: a document's own `lang` that differs is kept.
 * @param links the book's link rewriter.
 * @param frame the book's Project Gutenberg frame, which takes its part out of the document.
 * @param entries the navigation's entries that point into the document: where they name several
 *   chapters' headings, the document is split into them (`epub_split.ts`).
 * @returns one chapter per part (one for a document not split): the sanitised html, whether it is
 *   blank, the title (`""` when none was found), and whether the document held part of the
 *   Project Gutenberg frame (taken out).
 * @throws RangeError when elements nest too deeply (see `books/markup.ts`).
 */
export function renderDocument(
  source: string,
  page: { kind: "xhtml" | "svg" | "image"; path: string },
  label: string | null,
  bookTitle: string,
  bookLanguage: string | null,
  links: LinkRewriter,
  frame: EpubFrame,
  entries: readonly NavEntry[] = [],
): Array<SanitizedHtml & { title: string; framed: boolean; continues?: boolean }> {
  const document = parseMarkup(source, { recognizeSelfClosing: true, recognizeCDATA: true });
  const root = document.children;
  let nodes: ChildNode[];
  let title: string | null = label;
  let ownTitle: string | null = null;
  let wrapper: { name: string; attribs: Record<string, string> } | null = null;
  let restore: (() => void) | null = null;
  let framed = false;
  let parts: DocumentPart[] | null = null;
  if (page.kind === "svg") {
    const svg = DomUtils.findOne((element) => element.name === "svg", root);
    nodes = svg === null ? [] : [svg];
    const svgTitle = svg === null ? null : DomUtils.findOne((e) => e.name === "title", [svg]);
    ownTitle = svgTitle === null ? null : collapseWhitespace(DomUtils.textContent(svgTitle));
  } else {
    const html = DomUtils.findOne((element) => element.name === "html", root);
    const body = DomUtils.findOne((element) => element.name === "body", root);
    nodes = (body ?? html ?? document).children;
    // A Project Gutenberg EPUB carries its frame as in its HTML: the header and the licence are
    // the edition's metadata, not a page of the book.
    framed = frame.cut(nodes);
    parts = splitAtNav(nodes, entries);
    const titleElement = DomUtils.findOne((element) => element.name === "title", root);
    ownTitle = titleElement === null
      ? null
      : collapseWhitespace(DomUtils.textContent(titleElement));
    const heading = parts === null ? findHeading(nodes) : null;
    if (heading !== null) {
      const headingText = headingTitle(heading);
      if (title === null && headingText !== "") {
        title = headingText;
        restore = removeKeepingIds(heading);
      } else if (title !== null && comparable(headingText) === comparable(title)) {
        restore = removeKeepingIds(heading);
      }
    }
    // The document's language and direction, where they differ from the book's, stay on a wrapper.
    const lang = html?.attribs["xml:lang"] ?? html?.attribs.lang ?? body?.attribs["xml:lang"] ??
      body?.attribs.lang;
    const dir = body?.attribs.dir ?? html?.attribs.dir;
    const attribs: Record<string, string> = {};
    if (lang && lang.toLowerCase() !== bookLanguage?.toLowerCase()) attribs.lang = lang;
    if (dir === "rtl" || dir === "ltr") attribs.dir = dir;
    if (Object.keys(attribs).length > 0) wrapper = { name: "div", attribs };
  }
  // A `<title>` in quotes ("\"Cover\"", as some converters write it) is the word inside them.
  ownTitle = ownTitle?.replace(/^(["“'‘])(.+)["”'’]$/u, "$2") ?? null;
  if (
    title === null && ownTitle && comparable(ownTitle) !== comparable(bookTitle) &&
    !isGutenbergBookTitle(ownTitle)
  ) {
    title = ownTitle;
  }
  links.rewrite(nodes, page.path);
  if (parts !== null) {
    // Each chapter of a split document is titled by its entry; its heading, when it says the same,
    // is left out as a whole document's is.
    return parts.map((part) => {
      const heading = part.heading ?? findHeading(part.nodes);
      const again = heading !== null &&
        comparable(headingTitle(heading)) === comparable(part.label);
      const saved = [...part.nodes];
      const put = again ? removeFromPart(part.nodes, heading) : null;
      const shown = sanitizeNodes(part.nodes, wrapper);
      const { continues } = part;
      if (!shown.blank || put === null) return { title: part.label, ...shown, framed, continues };
      put();
      return { title: part.label, ...sanitizeNodes(saved, wrapper), framed, continues };
    });
  }
  const rendered = sanitizeNodes(nodes, wrapper);
  // A page that shows only its heading (a part's title page) shows that heading: it is a chapter.
  if (rendered.blank && restore !== null && !framed) {
    restore();
    return [{ title: title ?? "", ...sanitizeNodes(nodes, wrapper), framed }];
  }
  return [{ title: title ?? "", ...rendered, framed }];
}

/**
 * `removeKeepingIds` for a heading that may be one of a part's own nodes (a run of the body's
 * children, held as a list): the list then holds an empty `<span id>` per `id` in its place and
 * the tree is left as it is (taking a child out of a body of thousands, once per chapter, would
 * cost the square of the chapters); a heading inside a wrapper is taken out of the wrapper.
 *
 * @returns a function that puts a heading inside a wrapper back (the caller renders the part's
 *   first list again for one that was a part's own node).
 */
function removeFromPart(nodes: ChildNode[], heading: Element): () => void {
  const at = nodes.indexOf(heading);
  if (at === -1) return removeKeepingIds(heading);
  const ids = [heading, ...DomUtils.findAll(() => true, heading.children)]
    .map((element) => element.attribs.id)
    .filter((id): id is string => id !== undefined && id !== "");
  nodes.splice(at, 1, ...ids.map((id) => new Element("span", { id })));
  return () => {};
}

/**
 * The heading a chapter's title comes from: of the `hgroup`s and the `h1`–`h6` outside any
 * `hgroup`, the first of the highest rank (an `hgroup` ranks as its highest heading).
 */
function findHeading(nodes: ChildNode[]): Element | null {
  let best: Element | null = null;
  let bestRank = 7;
  // Stops at the first rank-1 heading: nothing can outrank it, and a book's text is mostly after
  // its heading.
  const visit = (children: ChildNode[]): void => {
    for (const node of children) {
      if (bestRank === 1) return;
      if (!isTag(node)) continue;
      const element = node;
      const rank = element.name === "hgroup" ? hgroupRank(element) : headingRank(element.name);
      if (rank < bestRank) {
        best = element;
        bestRank = rank;
      }
      if (rank === 7) visit(element.children);
    }
  };
  visit(nodes);
  return best;
}

const HEADING_RANKS: ReadonlyMap<string, number> = new Map([
  ["h1", 1],
  ["h2", 2],
  ["h3", 3],
  ["h4", 4],
  ["h5", 5],
  ["h6", 6],
]);

function headingRank(name: string): number {
  return HEADING_RANKS.get(name) ?? 7;
}

function hgroupRank(hgroup: Element): number {
  const ranks = DomUtils.findAll((e) => headingRank(e.name) < 7, hgroup.children)
    .map((e) => headingRank(e.name));
  return ranks.length === 0 ? 7 : Math.min(...ranks);
}

/** A heading's text; an `hgroup`'s headings and paragraphs joined by ": " ("I: Loomings"). */
function headingTitle(heading: Element): string {
  if (heading.name !== "hgroup") return collapseWhitespace(DomUtils.textContent(heading));
  return DomUtils.findAll((e) => headingRank(e.name) < 7 || e.name === "p", heading.children)
    .map((e) => collapseWhitespace(DomUtils.textContent(e)))
    .filter((part) => part !== "")
    .join(": ");
}

/** A title reduced to its letters and digits, lower case: how two titles are compared. */
function comparable(title: string): string {
  return title.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "");
}
