/**
 * HTML headings: their levels, their text as a reader sees it, and a title set as several headings
 * in a row read as one heading.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type ChildNode, Element, isTag, isText } from "domhandler";
import { collapseWhitespace } from "./book.ts";
import { parseByline } from "./text.ts";
import { classifyLine } from "./text_headings.ts";

/** Heading element names and their levels (`h1` is 1, the highest rank). */
export const HEADING_LEVELS: ReadonlyMap<string, number> = new Map(Object.entries({
  h1: 1,
  h2: 2,
  h3: 3,
  h4: 4,
  h5: 5,
  h6: 6,
}));

/**
 * A heading's text as shown: `<br>` as a space, page numbers (`span.pagenum`) and images left out.
 */
export function headingText(heading: Element): string {
  const parts: string[] = [];
  const alts: string[] = [];
  const visit = (nodes: ChildNode[]): void => {
    for (const node of nodes) {
      if (isText(node)) parts.push(node.data);
      else if (isTag(node)) {
        const classes = (node.attribs.class ?? "").split(/\s+/);
        if (node.name === "br") parts.push(" ");
        else if (node.name === "img") alts.push(node.attribs.alt ?? "");
        else if (!classes.includes("pagenum") && !classes.includes("caption")) {
          visit(node.children);
        }
      }
    }
  };
  visit(heading.children);
  // A heading set as a picture of its words names itself in the picture's alt text.
  return collapseWhitespace(parts.join("")) || collapseWhitespace(alts.join(" "));
}

/**
 * Join a title set as several headings in a row into one: a heading followed by another of the
 * same or a higher rank, with only white space and comments between them, is the first line of
 * that one (Gutenberg's `<h1>THE</h1><h1>"MIND THE PAINT"</h1><h1>GIRL</h1>`, `<h2>THE</h2>
 * <h1>FLYING DUTCHMAN</h1>`). Its children move into the later heading, ahead of a `<br>`, and it
 * leaves the tree. A heading that reads as a heading of its own (`CHAPTER I`, `BOOK II`,
 * `Preface`, `Contents`) or as a byline (`By Arthur Pinero`) is never joined, nor is one followed
 * by a lower rank (a subtitle).
 *
 * @param nodes the page's body, changed in place.
 */
export function joinSplitHeadings(nodes: ChildNode[]): void {
  for (const heading of DomUtils.findAll((element) => HEADING_LEVELS.has(element.name), nodes)) {
    const next = nextElement(heading);
    if (
      next === null || !HEADING_LEVELS.has(next.name) ||
      (HEADING_LEVELS.get(next.name) as number) > (HEADING_LEVELS.get(heading.name) as number) ||
      !ownLine(headingText(heading)) || !ownLine(headingText(next))
    ) {
      continue;
    }
    const lines = [...heading.children, new Element("br", {})];
    DomUtils.removeElement(heading);
    for (const line of lines.reverse()) DomUtils.prependChild(next, line);
  }
}

/** Whether a heading's text may be a line of a longer title: not a heading kind, not a byline. */
function ownLine(text: string): boolean {
  return classifyLine(text) === null && parseByline(text) === null;
}

/** The next sibling element, past white space and comments; `null` past anything else. */
function nextElement(node: ChildNode): Element | null {
  for (let next = node.next; next !== null; next = next.next) {
    if (isTag(next)) return next;
    if (isText(next) && next.data.trim() !== "") return null;
    if (!isText(next) && next.type !== "comment") return null;
  }
  return null;
}
