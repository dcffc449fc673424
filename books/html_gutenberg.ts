/**
 * The Project Gutenberg frame of an HTML book: the header and licence around the text, found by
 * the `*** START OF … ***` and `*** END OF … ***` markers (or the `pg-header`/`pg-footer` sections)
 * and cut out of the tree, their text kept for the metadata (books/gutenberg.ts reads it).
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type AnyNode, type ChildNode, Element, isTag, isText } from "domhandler";

/** A Gutenberg start marker inside a text node (the HTML files put it in a `<p>`, `<pre>`…). */
export const START_TEXT = /\*{1,3}\s*START OF (?:THE |THIS )?PROJECT GUTENBERG/i;

/** A Gutenberg end marker, or the older "End of the Project Gutenberg EBook of X" line. */
export const END_TEXT =
  /\*{1,3}\s*END OF (?:THE |THIS )?PROJECT GUTENBERG|End of (?:the )?Project Gutenberg/i;

/**
 * Remove the Project Gutenberg frame from the tree: its marked sections, and everything before the
 * start marker's element and after the end marker's, at every level up to the body.
 *
 * @returns the text of the header that was removed (for its `Title:`/`Author:` lines; the start
 *   marker's own element included, where older files set the whole header in one `<pre>`) and of
 *   the licence after the end marker (`#pg-footer`, and what follows the marker); `""` for none.
 */
export function stripGutenbergFrame(body: ChildNode[]): { header: string; footer: string } {
  let header = "";
  let footer = "";
  for (const element of DomUtils.findAll(isGutenbergFrame, body)) {
    if (element.attribs.id === "pg-header") header += blockText([element]);
    else footer += blockText([element]);
    DomUtils.removeElement(element);
  }
  const start = findMarker(body, START_TEXT);
  if (start !== null) {
    header += cutSiblings(start, "before") + blockText([start]);
    DomUtils.removeElement(start);
  }
  const end = findMarker(body, END_TEXT);
  if (end !== null) {
    footer = blockText([end]) + cutSiblings(end, "after") + footer;
    DomUtils.removeElement(end);
  }
  return { header, footer };
}

/**
 * Whether an element is a part of the Project Gutenberg frame its HTML (and EPUB) files mark:
 * `#pg-header`, `#pg-footer`, `.pg-boilerplate`.
 *
 * @param element a parsed element.
 * @returns `true` for a frame element.
 */
export function isGutenbergFrame(element: Element): boolean {
  const classes = element.attribs.class?.split(/\s+/) ?? [];
  return element.attribs.id === "pg-header" || element.attribs.id === "pg-footer" ||
    classes.includes("pg-boilerplate");
}

/** The element holding the first text node that matches, or `null`. */
export function findMarker(nodes: ChildNode[], marker: RegExp): Element | null {
  const [text] = DomUtils.filter((node) => isText(node) && marker.test(node.data), nodes, true, 1);
  const parent = text?.parent;
  return parent !== null && parent !== undefined && isTag(parent) ? parent : null;
}

/** Remove the node's siblings on one side, then its parent's, up to the root; return their text. */
export function cutSiblings(node: AnyNode, side: "before" | "after"): string {
  let removed = "";
  let current: AnyNode | null = node;
  while (current !== null && current.parent !== null) {
    const siblings: ChildNode[] = current.parent.children;
    const index = siblings.indexOf(current as ChildNode);
    const cut = side === "before" ? siblings.slice(0, index) : siblings.slice(index + 1);
    for (const sibling of cut) {
      removed += blockText([sibling]);
      DomUtils.removeElement(sibling);
    }
    if (isTag(current.parent) && current.parent.name === "body") break;
    current = current.parent;
  }
  return removed;
}

/** Elements that end a line of text (the header's `Title:` and `Author:` are in separate ones). */
export const BLOCKS = new Set([
  "p",
  "div",
  "br",
  "pre",
  "li",
  "tr",
  "section",
  "h1",
  "h2",
  "h3",
  "h4",
]);

/**
 * Text of the nodes with a line break after each block element, for line-based reading.
 *
 * @param nodes parsed nodes.
 * @returns their text, `\n` after each paragraph, division, heading, list item or row.
 */
export function blockText(nodes: ChildNode[]): string {
  let text = "";
  for (const node of nodes) {
    if (isText(node)) text += node.data;
    else if (isTag(node)) {
      text += blockText(node.children);
      if (BLOCKS.has(node.name)) text += "\n";
    }
  }
  return text;
}
