/**
 * Markdown books: front matter, the title heading and byline, and chapters split at the heading
 * level that divides the book, each rendered by marked and sanitised.
 *
 * @module
 */
import { basename } from "node:path";
import { Marked, type Token, type Tokens } from "marked";
import {
  type BookWarning,
  collapseWhitespace,
  type ExtractedBook,
  type ExtractedChapter,
  fileStem,
  unreadableBook,
} from "./book.ts";
import { fileName, linkChapters } from "./book_links.ts";
import { htmlText, sanitizeChapterHtml } from "./sanitize.ts";
import { parseByline } from "./text.ts";
import { classifyLine } from "./text_headings.ts";

/**
 * Longest paragraph (a run of text without a blank line) the reader takes, in characters.
 * marked's block rules are regular expressions whose backtracking runs out of stack on one
 * paragraph of some millions of characters (measured with marked 18: 5 MB read, 10 MB threw
 * "Maximum call stack size exceeded"); a book's paragraph is a few thousand.
 */
export const MAX_PARAGRAPH_CHARS = 1_000_000;

// The length of the longest run of `text` between blank lines (its own line breaks at the end
// of the text not counted); linear, no backtracking.
function longestParagraph(text: string): number {
  const blank = /\n[ \t]*\r?\n/g;
  let longest = 0;
  let start = 0;
  for (let match; (match = blank.exec(text)) !== null;) {
    longest = Math.max(longest, match.index - start);
    start = match.index + match[0].length;
  }
  let end = text.length;
  while (end > start && (text[end - 1] === "\n" || text[end - 1] === "\r")) end--;
  return Math.max(longest, end - start);
}

/** A private instance, so a `marked.use()` elsewhere in the process cannot change our output. */
const markdown = new Marked({ gfm: true });

/** A heading that is a catalogue field: `Year: 1836`, `Translator: …`, `Language: en`. */
const METADATA_HEADING =
  /^(?:year|date|published|language|translator|translated by|editor|illustrator)\s*:\s*\S/i;

/** `---` fenced `key: value` lines at the very top (YAML-like front matter). */
const FRONT_MATTER = /^---[ \t]*\n([\s\S]*?)\n---[ \t]*(?:\n|$)/;

/** Blockquote depth past which a stack overflow is read as nesting, not a long run of text. */
const MAX_QUOTE_DEPTH = 64;

/** The most `>` markers opening any one line (blockquote depth), spaces between them allowed. */
function deepestQuote(text: string): number {
  let deepest = 0;
  for (const match of text.matchAll(/^(?:[ \t]*>)+/gm)) {
    const depth = match[0].split(">").length - 1;
    if (depth > deepest) deepest = depth;
  }
  return deepest;
}

/**
 * Read a Markdown book into chapters at the heading level that divides it.
 *
 * When there is exactly one `#` heading, it comes first and other headings follow, it is the
 * book's title heading and is left out. A heading that is a byline (`## By Herman Melville`) gives
 * the author and is left out; so is a `by X` or `Author: X` paragraph right after the first `#`
 * heading. The split level is the one whose headings most often read as chapter headings
 * (`## Chapter 1`, `### I. A SCANDAL…`) when two or more do, else the highest level used twice or
 * more (as for HTML, `books/html_book.ts`); chapters split there and at every level above it. A
 * `Contents` section is left out. Content before the first split heading is a chapter titled like
 * the book; a section with nothing to show under its heading (a title page, a contents entry, a
 * part title right over its first chapter) is skipped. Title: front matter `title:`, else the
 * first `#` heading, else the file name's stem. Author: front matter `author:`, else the byline.
 *
 * @param source the decoded file text.
 * @param path the file's path (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book with its `warnings`; `chapters` may be empty, which the caller rejects.
 */
export function extractMarkdown(source: string, path: string, signal: AbortSignal): ExtractedBook {
  const front = FRONT_MATTER.exec(source);
  const fields = front === null ? new Map<string, string>() : parseFields(front[1]);
  const body = front === null ? source : source.slice(front[0].length);
  const longest = longestParagraph(body);
  if (longest > MAX_PARAGRAPH_CHARS) {
    throw unreadableBook(
      "markdown",
      path,
      `it holds a paragraph of ${longest} characters without a blank line; the Markdown ` +
        `reader takes at most ${MAX_PARAGRAPH_CHARS} per paragraph (add blank lines between ` +
        "paragraphs, or send the book as a .txt file)",
    );
  }
  let tokens: Token[];
  try {
    tokens = markdown.lexer(body);
  } catch (error) {
    // marked recurses once per blockquote level, and its block and inline rules are regular
    // expressions: a stack overflow is quotes nested too deeply, or one of the rules giving up on
    // a very long run of text. The deepest `>` run tells them apart.
    if (error instanceof RangeError && /call stack size/i.test(error.message)) {
      const nested = deepestQuote(body) >= MAX_QUOTE_DEPTH;
      throw unreadableBook(
        "markdown",
        path,
        nested
          ? "the file could not be parsed: it is nested too deeply"
          : "a Markdown rule ran out of stack on its text (a very long run without blank lines)",
        error,
      );
    }
    throw error;
  }

  const all = tokens.filter((token): token is Tokens.Heading => token.type === "heading");
  // "## By Herman Melville" is the author, not a chapter.
  const bylines = new Map(all.map((heading) => [heading, parseByline(headingText(heading))]));
  // "## Year: 1836" under the title is a catalogue field, not a chapter.
  const fieldHeadings = all.filter((heading) => METADATA_HEADING.test(headingText(heading)));
  const headings = all.filter((heading) =>
    bylines.get(heading) === null && !fieldHeadings.includes(heading)
  );
  const firstH1 = headings.find((heading) => heading.depth === 1);
  const h1Count = headings.filter((heading) => heading.depth === 1).length;
  const lone = h1Count === 1 && headings[0] === firstH1 ? firstH1 : undefined;
  const splitDepth = chooseDepth(headings.filter((heading) => heading !== lone), tokens);
  // A lone leading "#" is the title heading when other headings divide the book; over a book
  // with none it is the one chapter's title.
  const titleHeading = splitDepth === Infinity ? undefined : lone;
  const depth = splitDepth === Infinity && lone !== undefined ? 1 : splitDepth;
  // "# Title: The Captain's Daughter" labels itself.
  const h1Title = firstH1 && headingText(firstH1).replace(/^title\s*:\s*/i, "");
  // Never a lower section heading ("## About this book"): without a `#` or front matter title, a
  // leading HTML `<h1>` (as GitHub READMEs set a centred title), else the file name.
  const title = fields.get("title") || h1Title || htmlH1(tokens) || fileStem(path);
  const byline = firstH1 === undefined ? undefined : nextContent(tokens, tokens.indexOf(firstH1));
  const bylineName = byline?.type === "paragraph" ? parseByline(byline.text) : null;
  const headingByline = all.map((heading) => bylines.get(heading)).find((name) => name != null);
  const author = fields.get("author") || bylineName || headingByline || null;
  const dropped = new Set<Token | undefined>([
    titleHeading,
    bylineName === null ? undefined : byline,
    ...all.filter((heading) => bylines.get(heading) !== null),
    ...fieldHeadings,
  ]);

  const sections: { heading: Tokens.Heading | null; body: Token[] }[] = [{
    heading: null,
    body: [],
  }];
  for (const token of tokens) {
    if (dropped.has(token)) continue;
    if (token.type === "heading" && (token as Tokens.Heading).depth <= depth) {
      sections.push({ heading: token as Tokens.Heading, body: [] });
    } else {
      sections[sections.length - 1].body.push(token);
    }
  }

  const chapters: ExtractedChapter[] = [];
  // A heading with nothing under it (a part over its first chapter) is shown at the top of the
  // next chapter, not as a chapter of its own.
  let carried: Token[] = [];
  for (const section of sections) {
    signal.throwIfAborted();
    const heading = section.heading === null ? title : headingText(section.heading);
    if (section.heading !== null && classifyLine(heading) === "contents") {
      carried = [];
      continue;
    }
    if (sanitizeChapterHtml(markdown.parser(section.body)).blank) {
      if (section.heading !== null) carried.push(section.heading);
      continue;
    }
    const { html } = sanitizeChapterHtml(markdown.parser([...carried, ...section.body]));
    carried = [];
    chapters.push({ title: heading || `Chapter ${chapters.length + 1}`, html });
  }
  const warnings: BookWarning[] = depth === Infinity
    ? [{ kind: "no_headings", message: "No headings found: the book is one chapter" }]
    : [];
  const htmls = linkChapters(
    chapters.map((chapter) => chapter.html),
    new Set([fileName(basename(path))]),
    warnings,
  );
  for (const [index, chapter] of chapters.entries()) chapter.html = htmls[index];
  return { format: "markdown", title, author, chapters, warnings };
}

/** The text of a leading HTML `<h1>` block, before any Markdown heading; `""` when none. */
function htmlH1(tokens: Token[]): string {
  for (const token of tokens) {
    if (token.type === "heading") return "";
    if (token.type !== "html") continue;
    const h1 = /<h1\b[^>]*>([\s\S]*?)<\/h1>/i.exec(token.raw);
    if (h1 !== null) return htmlText(h1[1]);
  }
  return "";
}

/**
 * The heading depth to split at (and every depth above it): the one whose headings most often
 * read as chapter headings (two or more), else the highest depth used twice, else the highest
 * used; `Infinity` when there is no heading.
 */
function chooseDepth(headings: Tokens.Heading[], tokens: Token[]): number {
  const chapterLike = new Map<number, number>();
  const used = new Map<number, number>();
  for (const heading of headings) {
    used.set(heading.depth, (used.get(heading.depth) ?? 0) + 1);
    const kind = classifyLine(headingText(heading));
    if (kind === "chapter" || kind === "numeral" || kind === "bare") {
      chapterLike.set(heading.depth, (chapterLike.get(heading.depth) ?? 0) + 1);
    }
  }
  const parts = partDepths(headings, tokens);
  const depths = [...used.keys()].sort((a, b) => a - b).filter((depth) => !parts.has(depth));
  const best = Math.max(0, ...chapterLike.values());
  return (best >= 2 ? depths.find((depth) => chapterLike.get(depth) === best) : undefined) ??
    depths.find((depth) => (used.get(depth) ?? 0) >= 2) ?? depths[0] ?? Infinity;
}

/**
 * The depths that hold only part titles (as `partLevels` in `books/html_book.ts`): no heading of
 * the depth has anything under it before the next heading, and more headings below it hold text
 * than it has headings.
 */
function partDepths(headings: Tokens.Heading[], tokens: Token[]): Set<number> {
  const counted = new Set<Token>(headings);
  const holding = new Map<number, number>();
  const empty = new Map<number, number>();
  let current: Tokens.Heading | null = null;
  let shows = false;
  const close = (): void => {
    if (current === null) return;
    const counts = shows ? holding : empty;
    counts.set(current.depth, (counts.get(current.depth) ?? 0) + 1);
  };
  for (const token of tokens) {
    if (counted.has(token)) {
      close();
      current = token as Tokens.Heading;
      shows = false;
    } else if (token.type !== "space" && token.type !== "heading") {
      shows = true;
    }
  }
  close();
  const parts = new Set<number>();
  for (const [depth, count] of empty) {
    if (holding.has(depth)) continue;
    const below = [...holding].filter(([other]) => other > depth)
      .reduce((sum, [, held]) => sum + held, 0);
    if (below > count) parts.add(depth);
  }
  return parts;
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
  for (const line of block.split("\n")) {
    const match = /^([A-Za-z][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (match === null) continue;
    const value = collapseWhitespace(match[2].replace(/^(["'])(.*)\1$/, "$2"));
    if (value !== "") fields.set(match[1].toLowerCase(), value);
  }
  return fields;
}
