/**
 * The Project Gutenberg frame of an EPUB, which spans its spine documents: Ebookmaker puts the
 * header (notice, `Title:`/`Author:`, `*** START OF … ***`) at the top of the first document and
 * the licence (`*** END OF … ***` and the Project Gutenberg License) at the end of the last one,
 * splitting a long licence over the next documents as it splits the book, by size.
 *
 * The frame is found in every form Ebookmaker has written it:
 * - `#pg-header`, `#pg-footer` and `.pg-boilerplate` sections (Ebookmaker 0.11 on, 2021–);
 * - the bare markers, each in a `div` of its own among the header's and licence's `div`s
 *   (Ebookmaker 0.10, 2019–2021);
 * - one `div.pgmonospaced.pgheader` holding the old plain-text header with its `<br/>` line
 *   breaks, the start marker and the "Produced by" line, and another holding the end marker and
 *   the licence (Ebookmaker 0.9 and before, from the 2000s HTML files).
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { type AnyNode, type ChildNode, isTag, isText } from "domhandler";
import { licenceText } from "./gutenberg.ts";
import { blockText, cutSiblings, isGutenbergFrame } from "./html_gutenberg.ts";

/**
 * A start marker opening a text node, in the wordings Ebookmaker has carried over from the HTML:
 * `*** START OF THE PROJECT GUTENBERG EBOOK X ***`, `*** START OF THIS PROJECT GUTENBERG EBOOK`.
 * Only at the start of its text, so a sentence that mentions one is the book's.
 */
const START_LINE = /^\s*\*{1,3}\s*START OF (?:THE |THIS )?PROJECT GUTENBERG/i;

/**
 * An end marker opening a text node: `*** END OF THE PROJECT GUTENBERG EBOOK X ***`, or the older
 * `End of the Project Gutenberg EBook of X` / `End of Project Gutenberg's X` line before it. Every
 * later spine document is taken as licence, so a sentence ("Notes are at the end of the Project
 * Gutenberg eBook") must not match.
 */
const END_LINE =
  /^\s*(?:\*{1,3}\s*END OF (?:THE |THIS )?PROJECT GUTENBERG|End of (?:the )?Project Gutenberg(?:'s|’s|\s+e-?book|\s+etext))/i;

/**
 * The frame as it is found, one content document after another in spine order; `cut` is called
 * on each, once.
 */
export class EpubFrame {
  #header = "";
  #footer = "";
  /** A start marker or `#pg-header` was seen: a later start marker is the book's text. */
  #started = false;
  /** The end marker was seen: every later document is the rest of the licence. */
  #ended = false;

  /**
   * Take the frame out of one content document's body.
   *
   * @param nodes the document's body children, cut in place.
   * @returns whether the document held part of the frame (then a document left blank is the
   *   frame's page, not a chapter that shows nothing).
   */
  cut(nodes: ChildNode[]): boolean {
    if (this.#ended) {
      this.#footer += blockText(nodes);
      for (const node of [...nodes]) DomUtils.removeElement(node);
      return true;
    }
    let framed = false;
    for (const element of DomUtils.findAll(isGutenbergFrame, nodes)) {
      if (element.attribs.id === "pg-header") {
        this.#header += blockText([element]);
        this.#started = true;
      } else this.#footer += blockText([element]);
      framed = true;
      DomUtils.removeElement(element);
    }
    const start = this.#started ? null : markerNode(nodes, START_LINE);
    if (start !== null) {
      this.#header += cutSiblings(start, "before") + blockText([start]);
      DomUtils.removeElement(start);
      this.#started = framed = true;
    }
    const end = markerNode(nodes, END_LINE);
    if (end !== null) {
      this.#footer += blockText([end]) + cutSiblings(end, "after");
      DomUtils.removeElement(end);
      this.#ended = framed = true;
    }
    return framed;
  }

  /**
   * The licence the frame carried: the text from the end marker on (or `#pg-footer`), else the
   * header's notice; `null` when the book has no frame (its `dc:rights` is the licence then).
   */
  licence(): string | null {
    return licenceText(this.#footer) ?? licenceText(this.#header);
  }
}

/**
 * Whether a content document's `<title>` is the Gutenberg frame's name for the whole book ("The
 * Project Gutenberg eBook of X, by Y", "The Project Gutenberg Book of …", "The Project Gutenberg
 * EBook of …"): Ebookmaker gives every document of the book that `<title>`, so it never names a
 * chapter.
 *
 * @param title a `<title>`, whitespace collapsed.
 * @returns `true` for the frame's book title.
 */
export function isGutenbergBookTitle(title: string): boolean {
  return /^The Project Gutenberg (?:e-?book|book|etext)s? of\b/i.test(title);
}

/**
 * The node to cut at for the first text that matches: the element holding it, or the text node
 * itself when it lies straight in the body (cutting the body would take the whole book).
 */
function markerNode(nodes: ChildNode[], marker: RegExp): AnyNode | null {
  const [text] = DomUtils.filter((node) => isText(node) && marker.test(node.data), nodes, true, 1);
  if (text === undefined) return null;
  const parent = text.parent;
  return parent === null || !isTag(parent) || nodes.includes(text as ChildNode) ? text : parent;
}
