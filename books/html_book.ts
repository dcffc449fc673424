/**
 * HTML books: cutting the Project Gutenberg frame out of the tree, reading title and author from
 * `<title>` ("X, by Y"), `<meta name="author">`, the frame's header or a byline, and splitting
 * into chapters at the heading level that divides the book. A book whose chapters
 * are `<h3>` has as many chapters as `<h3>`s, and a "By Y" heading is the author, not a chapter.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { basename } from "node:path";
import { type ChildNode, Element, isTag } from "domhandler";
import {
  type BookWarning,
  collapseWhitespace,
  type ExtractedBook,
  type ExtractedChapter,
  fileStem,
} from "./book.ts";
import { fileName, linkChapters } from "./book_links.ts";
import { cleanHeaderField, licenceText, readGutenbergHeader } from "./gutenberg.ts";
import { parseHtmlPage, renderChapterHtml } from "./html.ts";
import { parseByline } from "./text.ts";
import { classifyLine } from "./text_headings.ts";
import { stripGutenbergFrame } from "./html_gutenberg.ts";
import { chapterStarts, dropContentsLists } from "./html_contents.ts";
import { HEADING_LEVELS, headingText, joinSplitHeadings } from "./html_headings.ts";

/**
 * Read an HTML book into chapters at the heading level that divides it.
 *
 * The Gutenberg frame goes first: `#pg-header`, `#pg-footer` and `.pg-boilerplate` elements, and
 * everything up to a `*** START OF …` marker and from a `*** END OF …` marker. Headings in a row
 * that set one title are joined (`joinSplitHeadings`). A heading that is a byline
 * (`By Herman Melville`) gives the author and is left out; so are the title headings: a lone `h1`
 * before every other heading, or `h1`s all of one text (a cover's and a title page's). The
 * level: the one whose headings most often read as chapter headings (`Chapter 1`,
 * `I. A SCANDAL…`, `Capítulo I`), when two or more do; else the highest level used twice or more. Chapters split at that level and every level above it (a `VOLUME I`
 * `h2` over `h3` chapters opens a part; with nothing under it, it is no chapter). A `Contents`
 * section is left out, and so is any section with nothing to show. Content before the first split
 * heading is a chapter titled like the book. Title: the frame header's, else `<title>` (less a
 * ", by Y" tail), else the first `h1`, else the file stem. Author: `<meta name="author">`, the
 * frame header's, the `<title>`'s "by Y", else a byline.
 *
 * @param source the decoded file text.
 * @param path the file's path (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book with its `warnings`; `chapters` may be empty, which the caller rejects.
 */
export function extractHtml(source: string, path: string, signal: AbortSignal): ExtractedBook {
  const page = parseHtmlPage(source);
  // `<a name="letter1">`, HTML 4's anchor, is an id to every link that names it.
  for (const anchor of DomUtils.findAll((e) => e.name === "a" && !!e.attribs.name, page.body)) {
    anchor.attribs.id ??= anchor.attribs.name;
  }
  const cut = stripGutenbergFrame(page.body);
  const frame = {
    ...readGutenbergHeader(cut.header),
    licence: licenceText(cut.footer) ?? licenceText(cut.header),
  };
  const titled = splitTitle(page.title);
  const warnings: BookWarning[] = [];
  joinSplitHeadings(page.body);

  let byline: string | null = null;
  const headings = DomUtils.findAll((element) => HEADING_LEVELS.has(element.name), page.body)
    .filter((heading) => {
      const name = parseByline(headingText(heading));
      if (name === null) return true;
      byline ??= name;
      DomUtils.removeElement(heading);
      return false;
    });
  const h1s = headings.filter((heading) => heading.name === "h1");
  // The title heading: a lone h1 before every other heading, or h1s that all say the same, the
  // first before every other heading (the title on the cover and again on the title page).
  const titleText = h1s.length > 0 ? headingText(h1s[0]).toLowerCase() : null;
  const titleHeadings = headings[0] === h1s[0] &&
      h1s.every((heading) => headingText(heading).toLowerCase() === titleText)
    ? h1s
    : [];
  const rest = chooseSplit(
    headings.filter((heading) => !titleHeadings.includes(heading)),
    page.body,
  );
  // Title headings are left out when other headings divide the book; over a book with no other
  // heading the first is the one chapter's title.
  const split = rest.size > 0 || titleHeadings.length === 0 ? rest : new Set([titleHeadings[0]]);
  if (rest.size > 0) { for (const heading of titleHeadings) DomUtils.removeElement(heading); }

  // A title heading keeps the punctuation that led on to its subtitle ("Frankenstein;").
  const title = frame.title ?? titled.title ??
    ((h1s.length > 0 ? cleanHeaderField(headingText(h1s[0])) : null) || fileStem(path));
  const sections = splitAtHeadings(page.body, (element) => split.has(element));
  const starts = chapterStarts(sections);
  // Taken out even when <meta> names the author: it is title-page furniture, not a chapter.
  byline ??= takeByline(sections[0].nodes);
  const author = page.author ?? frame.author ?? titled.author ?? byline;

  const chapters: ExtractedChapter[] = [];
  // Headings with nothing under them (a part over its first chapter): shown at the top of the
  // next chapter, so a reader still sees them, but no chapter of their own.
  let carried: ChildNode[] = [];
  for (const section of sections) {
    signal.throwIfAborted();
    const heading = section.heading === null ? title : headingText(section.heading);
    if (section.heading !== null && classifyLine(heading) === "contents") {
      carried = [];
      continue;
    }
    // Pictures set in the heading (a chapter's head-piece) stay with the chapter; else the
    // heading's ids stay as empty anchors, so a link to the heading still lands.
    const kept = section.heading === null
      ? section.nodes
      : DomUtils.existsOne((node) => node.name === "img", [section.heading])
      ? [section.heading, ...section.nodes]
      : [...idAnchors(section.heading), ...section.nodes];
    // A document's own <title> and <head> are metadata, not text: the sanitiser keeps `title`
    // elements for SVG's sake, so drop the document-level ones here.
    const body = kept.filter((node) =>
      !(isTag(node) && (node.name === "title" || node.name === "head"))
    );
    const own = dropContentsLists(body, starts);
    // Before the first chapter, headings alone (a subtitle under the title heading) are the
    // title page, not a chapter.
    if (section.heading === null && split.size > 0 && isTitlePage(own)) {
      const text = collapseWhitespace(DomUtils.textContent(own));
      if (text !== "") {
        warnings.push({
          kind: "front_matter_dropped",
          message: `Title page text left out: "${text}"`,
        });
      }
      continue;
    }
    if (renderChapterHtml(own).blank) {
      if (section.heading !== null) carried.push(section.heading);
      continue;
    }
    // The chapter's own anchors (those of the carried headings among them) go above the carried
    // headings, so a link to any of them opens the chapter at its top.
    const shown = own.findIndex((node) => showsSomething([node]));
    const lead = shown === -1 ? own.length : shown;
    const { html } = renderChapterHtml([...own.slice(0, lead), ...carried, ...own.slice(lead)]);
    carried = [];
    chapters.push({ title: heading || `Chapter ${chapters.length + 1}`, html });
  }
  if (split.size === 0) {
    warnings.push({ kind: "no_headings", message: "No headings found: the book is one chapter" });
  }
  const htmls = linkChapters(chapters.map((chapter) => chapter.html), ownNames(path), warnings);
  for (const [index, chapter] of chapters.entries()) chapter.html = htmls[index];
  return {
    format: "html",
    title,
    author,
    chapters,
    warnings,
    licence: frame.licence,
  };
}

/** Empty `<span id>`s for the ids on a heading and inside it, which leaves the chapter's body. */
function idAnchors(heading: Element): Element[] {
  return [heading, ...DomUtils.findAll(() => true, heading.children)]
    .map((element) => element.attribs.id)
    .filter((id): id is string => id !== undefined && id !== "")
    .map((id) => new Element("span", { id }));
}

/** The names a link gives the book's own file (`book.html#x` is a link inside the book). */
function ownNames(path: string): Set<string> {
  return new Set([fileName(basename(path))]);
}

/**
 * The headings to split at: the level whose headings most often read as chapter headings (two or
 * more), else the highest level used at least twice, else the highest used; with every heading
 * above that level.
 */
function chooseSplit(headings: Element[], body: ChildNode[]): Set<Element> {
  const chapterLike = new Map<number, number>();
  const used = new Map<number, number>();
  for (const heading of headings) {
    const level = HEADING_LEVELS.get(heading.name) as number;
    used.set(level, (used.get(level) ?? 0) + 1);
    const kind = classifyLine(headingText(heading));
    if (kind === "chapter" || kind === "numeral" || kind === "bare") {
      chapterLike.set(level, (chapterLike.get(level) ?? 0) + 1);
    }
  }
  const parts = partLevels(headings, body);
  const levels = [...used.keys()].sort((a, b) => a - b).filter((level) => !parts.has(level));
  let chosen = levels.find((level) =>
    (chapterLike.get(level) ?? 0) >= 2 &&
    levels.every((other) => (chapterLike.get(other) ?? 0) <= (chapterLike.get(level) ?? 0))
  );
  chosen ??= levels.find((level) => (used.get(level) ?? 0) >= 2) ?? levels[0];
  return new Set(
    chosen === undefined
      ? []
      : headings.filter((heading) => (HEADING_LEVELS.get(heading.name) as number) <= chosen),
  );
}

/**
 * The heading levels that hold only part titles: no heading of the level has anything under it
 * before the next heading, and more headings below it hold text than it has headings (two parts
 * over five chapters). Such a level is never the one that divides the book; its headings still
 * split it, and each is kept at the top of its first chapter.
 */
function partLevels(headings: Element[], body: ChildNode[]): Set<number> {
  const all = new Set(headings);
  const holding = new Map<number, number>();
  const empty = new Map<number, number>();
  for (const section of splitAtHeadings(body, (element) => all.has(element))) {
    if (section.heading === null) continue;
    const level = HEADING_LEVELS.get(section.heading.name) as number;
    const counts = showsSomething(section.nodes) ? holding : empty;
    counts.set(level, (counts.get(level) ?? 0) + 1);
  }
  const parts = new Set<number>();
  for (const [level, count] of empty) {
    if (holding.has(level)) continue;
    const below = [...holding].filter(([other]) => other > level)
      .reduce((sum, [, held]) => sum + held, 0);
    if (below > count) parts.add(level);
  }
  return parts;
}

/** Whether nodes hold text or a picture (what a reader would see under a heading). */
function showsSomething(nodes: ChildNode[]): boolean {
  return DomUtils.textContent(nodes).trim() !== "" ||
    DomUtils.existsOne((element) => SHOWN.has(element.name), nodes);
}

const SHOWN = new Set(["img", "svg", "math", "video", "audio", "picture", "object", "table"]);

/**
 * A `<title>` read for the book's title and author: a Gutenberg one ("The Project Gutenberg eBook
 * of X, by Y") or "X, by Y".
 */
function splitTitle(title: string | null): { title: string | null; author: string | null } {
  if (title === null) return { title: null, author: null };
  if (/Project Gutenberg/i.test(title)) return readGutenbergHeader(title);
  const match = /^(.+?),?\s+by\s+(\p{Lu}.*)$/u.exec(title);
  return match === null ? { title, author: null } : { title: match[1], author: match[2] };
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
        sections.push({ heading: node, nodes: takeAnchors(sections[sections.length - 1].nodes) });
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

/** Nodes whose text is all in headings, and short: a title page's subtitle and byline. */
function isTitlePage(nodes: ChildNode[]): boolean {
  const text = DomUtils.textContent(nodes).trim();
  if (text.length > MAX_TITLE_PAGE_CHARS) return false;
  const inHeadings = DomUtils.findAll((e) => HEADING_LEVELS.has(e.name), nodes)
    .map((heading) => DomUtils.textContent(heading)).join("");
  return collapseWhitespace(inHeadings).length === collapseWhitespace(text).length &&
    !DomUtils.existsOne((e) => SHOWN.has(e.name), nodes);
}

/** Longest title page left out, in characters (as for plain text, `books/text.ts`). */
const MAX_TITLE_PAGE_CHARS = 300;

/**
 * Take the anchors that end a section out of it: they mark the heading that follows, and go with
 * it, not at the end of the chapter before. An anchor is an element with an `id` (`<a name>` has
 * one by now) that shows nothing, or a wrapper showing nothing that holds one: Gutenberg's
 * `<a id="link2HCH0001"><!-- H2 anchor --></a>`, alone or in a `<p>` with `<br>`s. Taken from
 * the section's end back to the first node that shows something; what shows nothing and holds
 * no id (a `<div style="height: 4em">` of `<br>`s) is passed over and stays.
 *
 * @param nodes a section's nodes; the anchors are spliced out of it.
 * @returns the anchors, in document order.
 */
function takeAnchors(nodes: ChildNode[]): ChildNode[] {
  const anchors: ChildNode[] = [];
  for (let index = nodes.length - 1; index >= 0 && !showsSomething([nodes[index]]); index--) {
    if (holdsId(nodes[index])) anchors.unshift(...nodes.splice(index, 1));
  }
  return anchors;
}

function holdsId(node: ChildNode): boolean {
  return isTag(node) && DomUtils.existsOne((element) => (element.attribs.id ?? "") !== "", [node]);
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
