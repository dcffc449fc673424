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

/** A packed book file: a ZIP archive holding one, or a gzip'd one (`books/book_archive.ts`). */
export type ArchiveFormat = "zip" | "gzip";

/** File extension (lower case) → the archive it is unpacked as. */
export const ARCHIVES: ReadonlyMap<string, ArchiveFormat> = new Map([
  [".zip", "zip"],
  [".gz", "gzip"],
]);

/**
 * What a path's extension says it is, for reading it and for naming it in messages.
 *
 * @param path a file path.
 * @returns its book format or archive format, or `undefined` for an extension that is neither.
 */
export function sourceFormat(path: string): BookFormat | ArchiveFormat | undefined {
  const extension = extname(path).toLowerCase();
  return FORMATS.get(extension) ?? ARCHIVES.get(extension);
}

/** File extension (lower case) → the format it is read as. */
export const FORMATS: ReadonlyMap<string, BookFormat> = new Map([
  [".txt", "text"],
  [".md", "markdown"],
  [".markdown", "markdown"],
  [".html", "html"],
  [".htm", "html"],
  [".xhtml", "html"],
  [".epub", "epub"],
]);

/** One chapter: its title and its body as a sanitised XHTML fragment, without the title heading. */
export interface ExtractedChapter {
  /** Plain-text chapter title, whitespace collapsed; never empty (falls back to `Chapter N`). */
  title: string;
  /** Sanitised XHTML fragment of the chapter body; the heading the title came from is left out. */
  html: string;
}

/** Page-progression direction of an edition: left to right, or right to left. */
export type TextDirection = "ltr" | "rtl";

/** Primary language subtags written right to left. */
export const RTL_LANGUAGES: ReadonlySet<string> = new Set([
  "ar",
  "he",
  "iw",
  "fa",
  "ur",
  "yi",
  "ps",
  "sd",
  "ug",
  "dv",
  "ckb",
]);

/**
 * The direction a language is written in.
 *
 * @param language a BCP 47 tag (`fa`, `he-IL`, `en_GB`).
 * @returns `rtl` when its primary subtag is in {@linkcode RTL_LANGUAGES}, else `ltr`.
 */
export function languageDirection(language: string): TextDirection {
  return RTL_LANGUAGES.has(language.toLowerCase().split(/[-_]/)[0]) ? "rtl" : "ltr";
}

/**
 * What a reader would notice was imperfect in a book:
 * - `no_headings`: no chapter headings were found, so the book is one chapter;
 * - `spine_item_skipped`: an EPUB spine item shows nothing or cannot be shown, and was left out;
 * - `resource_missing`: an image, link target or other file the book refers to is not in it;
 * - `encoding_guessed`: a file did not say its encoding (or said it wrongly) and one was guessed.
 */
export type BookWarningKind =
  | "no_headings"
  | "spine_item_skipped"
  | "resource_missing"
  | "encoding_guessed"
  | "front_matter_dropped";

/** One warning about a book, stored with its edition and returned with its job. */
export interface BookWarning {
  kind: BookWarningKind;
  /** Sentence case, values quoted, e.g. `Image "OPS/a.png" is not in the archive`. */
  message: string;
}

/**
 * A file the chapters use (an image, audio, a font), written beside them in the edition's version
 * folder. Chapters refer to it by `path`, relative to the folder (e.g. `<img src="res/1-a.png">`).
 */
export interface BookResource {
  /** Relative path inside the version folder: `res/<n>-<safe name>`, never `..`, never absolute. */
  path: string;
  /** MIME type, e.g. `image/png`. */
  mediaType: string;
  bytes: Uint8Array;
}

/** A book read from one file: format, metadata and chapters in reading order (at least one). */
export interface ExtractedBook {
  format: BookFormat;
  /** Plain-text title; the file name's stem when the file names none. */
  title: string;
  /** Plain-text author, or `null` when the file names none. */
  author: string | null;
  chapters: ExtractedChapter[];
  /** BCP 47 language tag (e.g. `he`, `ja`), or `null`/absent when the file names none. */
  language?: string | null;
  /** Page-progression direction, or `null`/absent when the file gives no clue. */
  direction?: TextDirection | null;
  /** What was imperfect, in the order found; absent means none. */
  warnings?: BookWarning[];
  /** The files the chapters refer to; absent means none. */
  resources?: BookResource[];
  /**
   * The book's licence or rights statement, kept with the edition and never in a chapter: a
   * Project Gutenberg frame's licence text (plain text, `\n` line ends), an EPUB's `dc:rights`;
   * `null`/absent when the book states none.
   */
  licence?: string | null;
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
const FORMAT_NAMES: Readonly<Record<BookFormat | ArchiveFormat, string>> = {
  text: "text file",
  markdown: "Markdown",
  html: "HTML",
  epub: "EPUB",
  zip: "ZIP archive",
  gzip: "gzip file",
};

/**
 * Build the error for a book file that cannot be read, with the house message shape.
 *
 * @param format the format (or archive format) the file was read as.
 * @param path the path as given to `extractBook`, quoted in the message.
 * @param reason what is wrong with the file, lower case, values quoted.
 * @param cause the underlying error, if any.
 * @returns an error whose message reads `Cannot read EPUB "x.epub": <reason>`.
 */
export function unreadableBook(
  format: BookFormat | ArchiveFormat,
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
  // Read before narrowing: with Node's types in the graph, Error and RangeError are structurally
  // the same, so the false branch of `instanceof RangeError` would narrow `error` to never.
  const { name, message } = error;
  if (error instanceof RangeError) {
    // V8's wording; a recursive descent through the file's structure is the only deep recursion.
    return /call stack size/i.test(message) ? "it is nested too deeply" : message;
  }
  return `${name}: ${message}`;
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
