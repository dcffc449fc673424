/**
 * Contents lists in an HTML book's sections: what is left out because the reader lists the
 * chapters itself.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type ChildNode, Element, isTag } from "domhandler";
import { collapseWhitespace } from "./book.ts";
import { classifyLine } from "./text_headings.ts";

/** Fewest links into the book that make an element a contents list. */
const MIN_CONTENTS_LINKS = 3;

/** Elements that hold a contents list. */
const LIST_ELEMENTS = new Set(["p", "ul", "ol", "table", "div", "nav", "dl"]);

/** A section of the book as `chapterStarts` reads it: its heading and what follows it. */
export interface ChapterSection {
  heading: Element | null;
  nodes: ChildNode[];
}

/**
 * The ids a link opens a chapter by: those on each section's heading and inside it, and those of
 * the anchors that lead its nodes (what shows nothing before the first thing that does).
 *
 * @param sections the book cut at its split headings.
 * @returns the ids.
 */
export function chapterStarts(sections: readonly ChapterSection[]): Set<string> {
  const starts = new Set<string>();
  for (const section of sections) {
    if (section.heading === null) continue;
    const lead: ChildNode[] = [section.heading];
    for (const node of section.nodes) {
      if (DomUtils.textContent(node).trim() !== "" || (isTag(node) && node.name === "img")) break;
      lead.push(node);
    }
    for (const element of DomUtils.findAll(() => true, lead.filter(isTag))) {
      if (element.attribs.id) starts.add(element.attribs.id);
    }
  }
  return starts;
}

/**
 * Take contents lists out of a section: elements of three or more links into the book whose
 * link text is most of their text (a `<p class="toc">`, a list or table of chapter links), and a
 * paragraph that only says "Contents". A list whose links mostly open chapters (their targets are
 * in `starts`) is one in any wrapper (Gutenberg's `<blockquote>` of `<p class="toc">` lines), its
 * text measured as shown, without the indentation between its lines; a list of other links (a
 * list of plates) stays unless the element and measure above already found it.
 *
 * @param nodes a section's nodes; the lists leave the tree.
 * @param starts the ids that open chapters (`chapterStarts`).
 * @returns the nodes less the lists.
 */
export function dropContentsLists(nodes: ChildNode[], starts: ReadonlySet<string>): ChildNode[] {
  const linksOf = (element: Element): Element[] =>
    DomUtils.findAll(
      (link) => link.name === "a" && (link.attribs.href ?? "").startsWith("#"),
      element.children,
    );
  const isList = (element: Element): boolean => {
    const links = linksOf(element);
    if (links.length < MIN_CONTENTS_LINKS) return false;
    const linked = links.reduce((sum, link) => sum + DomUtils.textContent(link).trim().length, 0);
    return linked >= DomUtils.textContent(element).trim().length * 0.5;
  };
  const shown = (node: Element): number => collapseWhitespace(DomUtils.textContent(node)).length;
  const isChapterList = (element: Element): boolean => {
    const links = linksOf(element);
    if (links.length < MIN_CONTENTS_LINKS) return false;
    const opening = links.filter((link) => starts.has(fragment(link.attribs.href))).length;
    const linked = links.reduce((sum, link) => sum + shown(link), 0);
    return opening * 2 > links.length && linked >= shown(element) * 0.5;
  };
  const innermost = (test: (element: Element) => boolean) => (element: Element): boolean =>
    test(element) &&
    !DomUtils.existsOne((inner) => inner !== element && test(inner), element.children);
  const list = innermost(isList);
  const chapterList = innermost(isChapterList);
  const lists = DomUtils.findAll(
    (element) =>
      (LIST_ELEMENTS.has(element.name) &&
        // A lone "CONTENTS" line over the list, or the innermost element that is the list.
        (classifyLine(DomUtils.textContent(element)) === "contents" || list(element))) ||
      chapterList(element),
    nodes,
  );
  for (const found of lists) DomUtils.removeElement(found);
  return nodes.filter((node) => !lists.includes(node as Element));
}

/** A `#fragment` link's target id, percent-decoded where it decodes. */
function fragment(href: string): string {
  try {
    return decodeURIComponent(href.slice(1));
  } catch {
    return href.slice(1);
  }
}
