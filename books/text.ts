/**
 * Plain-text books: finding `CHAPTER I`-style heading lines, the title and byline at the top, and
 * turning blank-line separated paragraphs into escaped `<p>` elements. Also owns the byline rule
 * (`by X`, `Author: X`) the Markdown and HTML readers reuse.
 *
 * @module
 */
import { collapseWhitespace, type ExtractedBook, type ExtractedChapter, fileStem } from "./book.ts";
import { escapeHtml } from "./sanitize.ts";

const ROMAN = "(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})";
const UNITS = "one|two|three|four|five|six|seven|eight|nine";
const TEENS = "ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen";
const TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety";
const NUMBER_WORD = `(?:${TENS})(?:[- ](?:${UNITS}))?|${TEENS}|${UNITS}|hundred`;

/**
 * `Chapter` + a roman, arabic or worded number, then the end of the line or a separator and an
 * optional title: `CHAPTER XII. THE END`, `Chapter One: The Start`, `chapter 3`.
 */
const CHAPTER_HEADING = new RegExp(
  `^chapter\\s+(?:\\d+|${ROMAN}|${NUMBER_WORD})(?=$|[\\s.:;,\\-\\u2013\\u2014])`,
  "i",
);

/** Longest line taken as a chapter heading or a title, in characters. */
const MAX_HEADING_CHARS = 120;

/** How many paragraphs at the top of a book are searched for the title and byline. */
const FRONT_MATTER_BLOCKS = 4;

/**
 * Read a plain-text book into chapters split at `CHAPTER`-style heading lines.
 *
 * A heading is a line of its own after a blank line (so a wrapped sentence that happens to start
 * with "Chapter one" is not one). A heading with no text under it is skipped: it is an entry in a
 * contents list. Text before the first heading, or the whole text when there is no heading, is a
 * chapter titled like the book. The title is a `Title: X` line or a lone short first line near the
 * top, else the file name's stem; the author a `by X` or `Author: X` line near the top.
 *
 * @param source the decoded file text.
 * @param path the file's path (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book; `chapters` may be empty, which the caller rejects.
 */
export function extractText(source: string, path: string, signal: AbortSignal): ExtractedBook {
  const lines = source.split(/\r\n|\r|\n/);
  const headings = lines.flatMap((line, index) =>
    isChapterHeading(line) && (index === 0 || lines[index - 1].trim() === "") ? [index] : []
  );
  const front = readFrontMatter(toBlocks(lines.slice(0, headings[0] ?? lines.length)), headings);
  const title = front.title ?? fileStem(path);
  const chapters: ExtractedChapter[] = [];
  if (front.rest.length > 0) chapters.push({ title, html: toParagraphs(front.rest) });
  headings.forEach((start, index) => {
    signal.throwIfAborted();
    const body = toBlocks(lines.slice(start + 1, headings[index + 1] ?? lines.length));
    if (body.length > 0) {
      chapters.push({ title: collapseWhitespace(lines[start]), html: toParagraphs(body) });
    }
  });
  return { format: "text", title, author: front.author, chapters };
}

/**
 * Read an author's name out of a byline: `by Lewis Carroll`, `Author: Lewis Carroll` (after
 * `by`, the name must not start with a lower-case letter).
 *
 * @param line one line or paragraph of plain text.
 * @returns the name, whitespace collapsed, or `null` when the line is not a byline.
 */
export function parseByline(line: string): string | null {
  const text = collapseWhitespace(line);
  if (text.length > MAX_HEADING_CHARS) return null;
  const labelled = /^author\s*:\s*(\S.*)$/i.exec(text);
  if (labelled !== null) return labelled[1];
  // "by the river" inside wrapped prose is not a byline: a name starts with a capital.
  const by = /^by\s+(\S.*)$/i.exec(text);
  return by === null || /^\p{Ll}/u.test(by[1]) ? null : by[1];
}

function isChapterHeading(line: string): boolean {
  const text = line.trim();
  return text.length <= MAX_HEADING_CHARS && CHAPTER_HEADING.test(text);
}

interface FrontMatter {
  title: string | null;
  author: string | null;
  /** The preamble's paragraphs left once the title and byline lines are taken out. */
  rest: string[][];
}

function readFrontMatter(blocks: string[][], headings: number[]): FrontMatter {
  let title: string | null = null;
  let author: string | null = null;
  const top: string[][] = [];
  for (const block of blocks.slice(0, FRONT_MATTER_BLOCKS)) {
    const kept: string[] = [];
    for (const line of block) {
      const labelled = /^title\s*:\s*(\S.*)$/i.exec(line);
      const name = parseByline(line);
      if (title === null && labelled !== null) title = collapseWhitespace(labelled[1]);
      else if (author === null && name !== null) author = name;
      else kept.push(line);
    }
    top.push(kept);
  }
  const rest = [...top, ...blocks.slice(FRONT_MATTER_BLOCKS)].filter((block) => block.length > 0);
  // A lone short first line is the title only when something follows it; a one-line book's only
  // line is its text.
  const first = rest[0];
  if (
    title === null && first !== undefined && first.length === 1 &&
    first[0].length <= MAX_HEADING_CHARS && (rest.length > 1 || headings.length > 0)
  ) {
    title = collapseWhitespace(first[0]);
    rest.shift();
  }
  return { title, author, rest };
}

/** Split lines into paragraphs at blank lines; each paragraph is its trimmed, non-empty lines. */
function toBlocks(lines: string[]): string[][] {
  const blocks: string[][] = [];
  let current: string[] = [];
  for (const line of lines) {
    const text = line.trim();
    if (text !== "") {
      current.push(text);
    } else if (current.length > 0) {
      blocks.push(current);
      current = [];
    }
  }
  if (current.length > 0) blocks.push(current);
  return blocks;
}

function toParagraphs(blocks: string[][]): string {
  // Lines stay on their own lines inside the <p>: a browser shows them as one flowing paragraph,
  // and the original line breaks (verse, letters) survive for whoever needs them.
  return blocks.map((block) => `<p>${escapeHtml(block.join("\n"))}</p>`).join("\n");
}
