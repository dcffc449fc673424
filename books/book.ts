/**
 * What an extracted book is: its formats, its shape, and the error for a file that cannot be read
 * as one. Kept apart from `extract.ts` so the format readers can throw the error without importing
 * the dispatcher that imports them; `extract.ts` re-exports all of it as the public API.
 *
 * @module
 */
import { basename, extname } from "node:path";

/** A book file format, chosen by file extension. */
export type BookFormat = "text" | "markdown" | "html" | "epub";

/** One chapter: its title and its body as a sanitised XHTML fragment, without the title heading. */
export interface ExtractedChapter {
  /** Plain-text chapter title, whitespace collapsed; never empty (falls back to `Chapter N`). */
  title: string;
  /** Sanitised XHTML fragment of the chapter body; the heading the title came from is left out. */
  html: string;
}

/** A book read from one file: format, metadata and chapters in reading order (at least one). */
export interface ExtractedBook {
  format: BookFormat;
  /** Plain-text title; the file name's stem when the file names none. */
  title: string;
  /** Plain-text author, or `null` when the file names none. */
  author: string | null;
  chapters: ExtractedChapter[];
  /**
   * What came out imperfect, one readable sentence each (encoding guessed, no headings found so
   * the book is one chapter). Issue 10, "Say what was imperfect". Optional until every reader
   * sets it; `extractInProcess` always does.
   */
  warnings?: string[];
}

/**
 * Thrown when the file itself cannot be read as a book: missing, empty, binary data (plain
 * text with a NUL byte), a broken EPUB, markup that cannot be parsed, no chapters. Permanent: the
 * job must fail at once, not retry. Any other error from `extractBook` (permission, I/O, abort) is
 * transient and is not this class.
 */
export class UnreadableBookError extends Error {
  override name = "UnreadableBookError";
}

/** How each format is named in error messages. */
const FORMAT_NAMES: Readonly<Record<BookFormat, string>> = {
  text: "text file",
  markdown: "Markdown",
  html: "HTML",
  epub: "EPUB",
};

/**
 * Build the error for a book file that cannot be read, with the house message shape.
 *
 * @param format the format the file was read as.
 * @param path the path as given to `extractBook`, quoted in the message.
 * @param reason what is wrong with the file, lower case, values quoted.
 * @param cause the underlying error, if any.
 * @returns an error whose message reads `Cannot read EPUB "x.epub": <reason>`.
 */
export function unreadableBook(
  format: BookFormat,
  path: string,
  reason: string,
  cause?: unknown,
): UnreadableBookError {
  const message = `Cannot read ${FORMAT_NAMES[format]} "${path}": ${reason}`;
  return cause === undefined
    ? new UnreadableBookError(message)
    : new UnreadableBookError(message, { cause });
}

/**
 * Say why a format reader or a library it calls threw while parsing a file, as the detail of an
 * `UnreadableBookError` reason. Parsing is deterministic, so such a throw is about the file.
 *
 * @param error what the parse threw.
 * @returns `it is nested too deeply` for a stack overflow, a RangeError's message (e.g. the
 *   nesting bound of `books/markup.ts`), else `<name>: <message>`.
 */
export function describeParseError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // V8's wording; a recursive descent through the file's structure is the only deep recursion.
  if (error instanceof RangeError && /call stack size/i.test(error.message)) {
    return "it is nested too deeply";
  }
  return error instanceof RangeError ? error.message : `${error.name}: ${error.message}`;
}

/**
 * Collapse runs of whitespace to one space and trim, for titles and names shown as plain text.
 *
 * @param text any text.
 * @returns the text on one line.
 */
export function collapseWhitespace(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/**
 * The file name without directory or extension, the title of a book that names none.
 *
 * @param path a file path.
 * @returns e.g. `"moby_dick"` for `"/books/moby_dick.epub"`.
 */
export function fileStem(path: string): string {
  return basename(path, extname(path));
}
