/**
 * Extraction itself, on the calling thread: pick the format from the file extension, read the
 * file (abortable, bounded), hand it to that format's reader, refuse a result with no chapters,
 * and make what comes out storable. `extract_child.ts` runs this in a child process; the public
 * `extractBook` (`extract.ts`) talks to that child, and calls {@linkcode parseBook} itself only
 * for a tiny plain-text book (`INLINE_BOOK_BYTES`).
 *
 * Failure classes, decided here once: anything a format reader or its libraries throw while
 * parsing is about the file (parsing is deterministic) and becomes an `UnreadableBookError`; only
 * reading the file can fail in a way worth a retry.
 *
 * @module
 */
import { extname } from "node:path";
import {
  ARCHIVES,
  type BookFormat,
  type BookWarning,
  describeParseError,
  type ExtractedBook,
  FORMATS,
  unreadableBook,
  UnreadableBookError,
} from "./book.ts";
import { unpackBook } from "./book_archive.ts";
import { extractEpub } from "./epub.ts";
import { extractHtml } from "./html_book.ts";
import { extractMarkdown } from "./markdown.ts";
import { decodeBookText, isBlank, readBookFile } from "./read.ts";
import { vetBookResources } from "./resource_types.ts";
import { extractText } from "./text.ts";

/**
 * Read a book file into its title, author and chapters, on this thread. A `.zip` or `.gz` is
 * unpacked first (`books/book_archive.ts`) and its book file read as that file would be.
 *
 * NUL (U+0000), which Postgres cannot store in text: a plain-text file holding a NUL byte is
 * refused (`decodeBookText`); in the markup formats every U+0000 in the finished book (titles,
 * author, chapter html) becomes U+FFFD, as the HTML and CommonMark specs replace it. That one pass
 * here covers NULs from raw bytes and from character references alike, whichever parser let them
 * through.
 *
 * @param path the book file; a FIFO works, read until its writer closes it.
 * @param signal aborts the read promptly, even while opening or reading blocks; checked between
 *   chapters too. A parse in progress is not interrupted: run this in a child process to bound that.
 * @returns the book, with at least one chapter, its `warnings` (possibly empty), no U+0000
 *   anywhere, and only resources whose bytes are an image, audio, video or (sanitised) SVG file.
 * @throws UnreadableBookError when the extension is not a known format, the file is missing, is
 *   a directory, is over 256 MiB, is empty or only whitespace, is binary data (plain text with a NUL
 *   byte, or control characters), is a broken EPUB, cannot be parsed (nested too deeply, or any
 *   other throw while parsing), or yields no chapters; for a `.zip` or `.gz`, also when it is
 *   damaged, over an unpacking bound, or holds no single book file (`unpackBook`).
 * @throws `signal.reason` when the signal aborts.
 * @throws any other error from the file system as-is (e.g. `Deno.errors.NotCapable`,
 *   `Deno.errors.PermissionDenied`, an I/O error): transient, worth a retry.
 */
export async function extractInProcess(
  path: string,
  signal: AbortSignal,
): Promise<ExtractedBook> {
  signal.throwIfAborted();
  const extension = extname(path).toLowerCase();
  const archive = ARCHIVES.get(extension);
  if (archive !== undefined) {
    // The packed file is read as it would be on disk, under its name inside the archive.
    const packed = unpackBook(archive, await readBookFile(path, archive, signal), path);
    signal.throwIfAborted();
    return await vetBookResources(parseBook(packed.format, packed.bytes, packed.path, signal));
  }
  const format = FORMATS.get(extension);
  if (format === undefined) {
    const known = [...FORMATS.keys(), ...ARCHIVES.keys()].join(", ");
    throw new UnreadableBookError(
      extension === ""
        ? `Cannot read book "${path}": the file name has no extension, expected one of ${known}`
        : `Cannot read book "${path}": unknown file type "${extension}", expected one of ${known}`,
    );
  }
  const book = parseBook(format, await readBookFile(path, format, signal), path, signal);
  // A resource is what its bytes are, never what the book declares (books/resource_types.ts).
  return await vetBookResources(book);
}

/**
 * Parse a book file's bytes, already read, on this thread: what {@linkcode extractInProcess} does
 * once the file is read (and its contract, the reading aside).
 *
 * @param format the format its extension names.
 * @param bytes the whole file.
 * @param path the file's path, for messages and as the title of a book that names none.
 * @param signal checked before the parse and between chapters.
 * @returns the book, with at least one chapter and no U+0000 anywhere.
 * @throws UnreadableBookError when the bytes are empty, binary data, cannot be parsed or yield no
 *   chapters; `signal.reason` when the signal aborts.
 */
export function parseBook(
  format: BookFormat,
  bytes: Uint8Array,
  path: string,
  signal: AbortSignal,
): ExtractedBook {
  if (isBlank(bytes)) throw unreadableBook(format, path, "the file is empty");
  signal.throwIfAborted();
  let book: ExtractedBook;
  try {
    if (format === "epub") {
      book = extractEpub(bytes, path, signal);
    } else {
      const decoded = decodeBookText(bytes, path, format);
      book = readTextFormat(format, decoded.text, path, signal);
      if (decoded.warning !== null) {
        const guessed: BookWarning = { kind: "encoding_guessed", message: decoded.warning };
        book.warnings = [guessed, ...(book.warnings ?? [])];
      }
    }
  } catch (error) {
    if (error instanceof UnreadableBookError || signal.aborted) throw error;
    // A stack overflow, a library's TypeError on malformed input, the nesting bound: the same
    // file fails the same way on every attempt, so it must not be retried as a transient fault.
    throw unreadableBook(
      format,
      path,
      `the file could not be parsed: ${describeParseError(error)}`,
      error,
    );
  }
  if (book.chapters.length === 0) throw unreadableBook(format, path, "no chapters found");
  return replaceNul(book);
}

function readTextFormat(
  format: Exclude<BookFormat, "epub">,
  source: string,
  path: string,
  signal: AbortSignal,
): ExtractedBook {
  switch (format) {
    case "text":
      return extractText(source, path, signal);
    case "markdown":
      return extractMarkdown(source, path, signal);
    case "html":
      return extractHtml(source, path, signal);
  }
}

/** The book with every U+0000 in its strings replaced by U+FFFD (see `extractInProcess`). */
function replaceNul(book: ExtractedBook): ExtractedBook {
  const clean = (text: string): string => text.replaceAll("\0", "\uFFFD");
  return {
    ...book,
    title: clean(book.title),
    author: book.author === null ? null : clean(book.author),
    // jsonb refuses U+0000 even more strictly than text: warnings quote file names.
    language: typeof book.language === "string" ? clean(book.language) : book.language,
    licence: typeof book.licence === "string" ? clean(book.licence) : book.licence ?? null,
    warnings: (book.warnings ?? []).map((warning) => ({
      ...warning,
      message: clean(warning.message),
    })),
    chapters: book.chapters.map((chapter) => ({
      title: clean(chapter.title),
      html: clean(chapter.html),
    })),
  };
}
