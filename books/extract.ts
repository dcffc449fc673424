/**
 * The book-extraction entry point: pick the format from the file extension, read the file
 * (abortable, bounded), hand it to that format's reader, and refuse a result with no chapters.
 * This is the folder's public API; the types and the error class are re-exported from `book.ts`,
 * where the format readers get them without importing this dispatcher.
 *
 * @module
 */
import { extname } from "node:path";
import {
  type BookFormat,
  type ExtractedBook,
  unreadableBook,
  UnreadableBookError,
} from "./book.ts";
import { extractEpub } from "./epub.ts";
import { extractHtml } from "./html.ts";
import { extractMarkdown } from "./markdown.ts";
import { decodeBookText, isBlank, readBookFile } from "./read.ts";
import { extractText } from "./text.ts";

export type { BookFormat, ExtractedBook, ExtractedChapter } from "./book.ts";
export { UnreadableBookError } from "./book.ts";

/** File extension (lower case) → the format it is read as. */
const FORMATS: ReadonlyMap<string, BookFormat> = new Map([
  [".txt", "text"],
  [".md", "markdown"],
  [".markdown", "markdown"],
  [".html", "html"],
  [".htm", "html"],
  [".xhtml", "html"],
  [".epub", "epub"],
]);

/**
 * Read a book file into its title, author and chapters.
 *
 * The format comes from the extension (case-insensitive): `.txt` text, `.md`/`.markdown`
 * Markdown, `.html`/`.htm`/`.xhtml` HTML, `.epub` EPUB. Text formats must be UTF-8. Chapter html
 * is always sanitised (see `books/sanitize.ts`).
 *
 * @param path the book file; a FIFO works, read until its writer closes it.
 * @param signal aborts the extraction promptly, even while opening or reading blocks (a FIFO
 *   with no writer); checked between chapters too.
 * @returns the book, with at least one chapter.
 * @throws UnreadableBookError (permanent: fail the job, do not retry) when the extension is not a
 *   known format, the file is missing, is a directory, is over 256 MiB, is empty or only
 *   whitespace, is not valid UTF-8 (text formats), is a broken EPUB, or yields no chapters.
 * @throws `signal.reason` (an `AbortError` `DOMException` by default) when the signal aborts.
 * @throws any other error from the file system as-is (e.g. `Deno.errors.NotCapable`,
 *   `Deno.errors.PermissionDenied`, an I/O error): transient, worth a retry.
 * @example
 * const book = await extractBook("/srv/uploads/moby_dick.epub", signal);
 * console.log(book.title, book.chapters.length);
 */
export async function extractBook(path: string, signal: AbortSignal): Promise<ExtractedBook> {
  signal.throwIfAborted();
  const extension = extname(path).toLowerCase();
  const format = FORMATS.get(extension);
  if (format === undefined) {
    const known = [...FORMATS.keys()].join(", ");
    throw new UnreadableBookError(
      extension === ""
        ? `Cannot read book "${path}": the file name has no extension, expected one of ${known}`
        : `Cannot read book "${path}": unknown file type "${extension}", expected one of ${known}`,
    );
  }

  const bytes = await readBookFile(path, format, signal);
  if (isBlank(bytes)) throw unreadableBook(format, path, "the file is empty");
  signal.throwIfAborted();
  const book = format === "epub"
    ? extractEpub(bytes, path, signal)
    : readTextFormat(format, decodeBookText(bytes, path, format), path, signal);
  if (book.chapters.length === 0) throw unreadableBook(format, path, "no chapters found");
  return book;
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
