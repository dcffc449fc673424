/**
 * Markdown books: front matter, the title heading and byline, and chapters split at the top-most
 * heading level the book uses, each rendered by marked and sanitised.
 *
 * @module
 */
import { Marked, type Token, type Tokens } from "marked";
import { collapseWhitespace, type ExtractedBook, type ExtractedChapter, fileStem } from "./book.ts";
import { htmlText, isBlankHtml, sanitizeChapterHtml } from "./sanitize.ts";
import { parseByline } from "./text.ts";

/** A private instance, so a `marked.use()` elsewhere in the process cannot change our output. */
const markdown = new Marked({ gfm: true });

/** `---` fenced `key: value` lines at the very top (YAML-like front matter). */
const FRONT_MATTER = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

/**
 * Read a Markdown book into chapters split at the top-most heading level it uses.
 *
 * When there is exactly one `#` heading and it comes first, it is the book's title heading: it is
 * left out of the chapters, which split at the next level used instead (usually `##`). A `by X` or
 * `Author: X` paragraph right after the first `#` heading is the byline and is left out too.
 * Content before the first split heading is a chapter titled like the book; a section with nothing
 * to show under its heading (a title page, a contents entry) is skipped. Title: front matter
 * `title:`, else the first `#` heading, else the file name's stem. Author: front matter `author:`,
 * else the byline, else `null`.
 *
 * @param source the decoded file text.
 * @param path the file's path (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book; `chapters` may be empty, which the caller rejects.
 */
export function extractMarkdown(source: string, path: string, signal: AbortSignal): ExtractedBook {
  const front = FRONT_MATTER.exec(source);
  const fields = front === null ? new Map<string, string>() : parseFields(front[1]);
  const tokens: Token[] = markdown.lexer(front === null ? source : source.slice(front[0].length));

  const headings = tokens.filter((token): token is Tokens.Heading => token.type === "heading");
  const firstH1 = headings.find((heading) => heading.depth === 1);
  const h1Count = headings.filter((heading) => heading.depth === 1).length;
  const titleHeading = h1Count === 1 && headings[0] === firstH1 ? firstH1 : undefined;
  // Infinity when no heading is left: nothing splits, the whole book is one chapter.
  const splitDepth = headings.reduce(
    (depth, heading) => heading === titleHeading ? depth : Math.min(depth, heading.depth),
    Infinity,
  );

  const title = fields.get("title") || (firstH1 && headingText(firstH1)) || fileStem(path);
  const byline = firstH1 === undefined ? undefined : nextContent(tokens, tokens.indexOf(firstH1));
  const bylineName = byline?.type === "paragraph" ? parseByline(byline.text) : null;
  const author = fields.get("author") || bylineName;
  const dropped = new Set<Token | undefined>([
    titleHeading,
    bylineName === null ? undefined : byline,
  ]);

  const sections: { heading: Tokens.Heading | null; body: Token[] }[] = [{
    heading: null,
    body: [],
  }];
  for (const token of tokens) {
    if (dropped.has(token)) continue;
    if (token.type === "heading" && token.depth === splitDepth) {
      sections.push({ heading: token as Tokens.Heading, body: [] });
    } else {
      sections[sections.length - 1].body.push(token);
    }
  }

  const chapters: ExtractedChapter[] = [];
  for (const section of sections) {
    signal.throwIfAborted();
    const html = sanitizeChapterHtml(markdown.parser(section.body));
    if (isBlankHtml(html)) continue;
    const heading = section.heading === null ? title : headingText(section.heading);
    chapters.push({ title: heading || `Chapter ${chapters.length + 1}`, html });
  }
  return { format: "markdown", title, author, chapters };
}

/** Plain text of a heading, inline markup (emphasis, links, code) rendered and stripped. */
function headingText(heading: Tokens.Heading): string {
  return htmlText(markdown.parser([heading]));
}

/** The first token after `index` that is not blank space. */
function nextContent(tokens: Token[], index: number): Token | undefined {
  return tokens.slice(index + 1).find((token) => token.type !== "space");
}

/** `key: value` lines, keys lower-cased, values unquoted; other lines (lists, nesting) ignored. */
function parseFields(block: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of block.split(/\r?\n/)) {
    const match = /^([A-Za-z][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (match === null) continue;
    const value = collapseWhitespace(match[2].replace(/^(["'])(.*)\1$/, "$2"));
    if (value !== "") fields.set(match[1].toLowerCase(), value);
  }
  return fields;
}
