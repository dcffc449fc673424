/**
 * The nesting bound on untrusted markup, and the one way this folder parses markup into a tree.
 *
 * htmlparser2 keeps its open elements with `Array.unshift`, so each level of nesting costs time in
 * proportion to the depth so far: a 2 MiB page of 200,000 nested `<div>`s took 17 s to parse (field
 * report), and domutils, dom-serializer and the sanitiser's walk then recurse once per level and
 * overflow the stack. No book nests that deep, so markup nested past
 * {@linkcode MAX_NESTING_DEPTH} is refused while it is being parsed, before either cost is paid.
 *
 * @module
 */
import { Parser, type ParserOptions } from "htmlparser2";
import { type Document, DomHandler, type DomHandlerOptions } from "domhandler";

/**
 * Deepest element nesting accepted in a book's markup. Chromium's HTML parser stops nesting at
 * the same depth (`kMaximumHTMLParserDOMTreeDepth`); real books stay well under 50.
 */
export const MAX_NESTING_DEPTH = 512;

/**
 * Parse markup into a DOM tree, refusing it as soon as elements nest past `MAX_NESTING_DEPTH`.
 *
 * @param source HTML or XHTML markup.
 * @param options htmlparser2's parser and DOM options (as for its `parseDocument`).
 * @returns the document node.
 * @throws RangeError when elements nest deeper than `MAX_NESTING_DEPTH`.
 */
export function parseMarkup(
  source: string,
  options?: ParserOptions & DomHandlerOptions,
): Document {
  const handler = new BoundedDomHandler(undefined, options);
  new Parser(handler, options).end(source);
  return handler.root;
}

/** A DomHandler that stops the parse once its stack of open elements is past the bound. */
class BoundedDomHandler extends DomHandler {
  override onopentag(name: string, attribs: Record<string, string>): void {
    // tagStack holds the document node below the open elements.
    if (this.tagStack.length > MAX_NESTING_DEPTH) throw tooDeep();
    super.onopentag(name, attribs);
  }
}

function tooDeep(): RangeError {
  return new RangeError(`elements are nested more than "${MAX_NESTING_DEPTH}" deep`);
}
