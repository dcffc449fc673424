/**
 * Reading a book file's bytes from disk: bounded in size, abortable even when the open or a read
 * blocks forever (a FIFO with no writer), and classifying what went wrong into "this file is not a
 * book" (`UnreadableBookError`, permanent) versus everything else (propagated as-is, transient).
 *
 * @module
 */
import { type ArchiveFormat, type BookFormat, unreadableBook } from "./book.ts";
import { BinaryDataError, decodeBookBytes, type DecodedText } from "./decode.ts";

/**
 * Largest book file read, in bytes (256 MiB). An illustrated EPUB can run to a few hundred MiB, a
 * text book to a few; past this the file is refused rather than held in memory.
 */
export const MAX_BOOK_BYTES = 256 * 1024 * 1024;

/** Largest read per `read` call, in bytes. */
const CHUNK_BYTES = 1024 * 1024;
/** Read size for a FIFO or device (fstat reports no size): a pipe's buffer, all one read yields. */
const STREAM_CHUNK_BYTES = 64 * 1024;

/**
 * Read a whole book file, rejecting with `signal.reason` as soon as the signal aborts.
 *
 * `Deno.open` and `FsFile.read` take no signal, and on a FIFO with no writer they block a worker
 * thread until one appears, so each is raced against the abort. A read in flight is cancelled by
 * closing the file; an open in flight cannot be cancelled, so its thread stays blocked until a
 * writer appears, and the file it then yields is closed at once.
 *
 * @param path file to read.
 * @param format the format (or archive format) it will be read as (names it in error messages).
 * @param signal aborts the read; the promise then rejects with `signal.reason`.
 * @returns the file's bytes (at most `MAX_BOOK_BYTES`).
 * @throws UnreadableBookError when the file does not exist (or a directory in its path is a
 *   file), is a directory, or is larger than
 *   `MAX_BOOK_BYTES`.
 * @throws `signal.reason` when the signal aborts; any other `Deno.errors.*` (permission, I/O)
 *   as-is.
 */
export async function readBookFile(
  path: string,
  format: BookFormat | ArchiveFormat,
  signal: AbortSignal,
): Promise<Uint8Array> {
  signal.throwIfAborted();
  let file: Deno.FsFile;
  try {
    file = await raceAbort(Deno.open(path, { read: true }), signal, (late) => late.close());
  } catch (error) {
    // ENOTDIR: a directory in the path is a file, so the named file cannot exist either.
    if (error instanceof Deno.errors.NotFound || error instanceof Deno.errors.NotADirectory) {
      throw unreadableBook(format, path, "file not found", error);
    }
    throw error;
  }
  try {
    // fstat never blocks, not even on a FIFO.
    const info = await file.stat();
    if (info.isDirectory) {
      // Retrying cannot turn a directory into a book, so this is as permanent as a missing file.
      throw unreadableBook(format, path, "the path is a directory, not a file");
    }
    if (info.size > MAX_BOOK_BYTES) {
      throw unreadableBook(format, path, tooLarge());
    }
    return await readAll(file, path, format, signal, info);
  } finally {
    // Cancels a read still in flight after an abort.
    file.close();
  }
}

/**
 * Decode a text-format book (see `books/decode.ts`): declared encoding, else UTF-8, else UTF-16
 * without a mark, else a detected legacy encoding, which the caller reports as a warning.
 *
 * A NUL byte in a plain-text book means the file is binary data, and Postgres cannot store U+0000
 * in text (it failed the insert, and the queue retried that as transient): refused here. Markup
 * formats may pass it; `extractInProcess` replaces it in their output, as the HTML spec does.
 *
 * @param bytes the file's bytes.
 * @param path the file's path, for error messages.
 * @param format the format it is read as (HTML looks for `<meta charset>` and an XML prolog).
 * @returns the decoded text (not blank) and, when its encoding was guessed, a warning.
 * @throws UnreadableBookError when the bytes are binary data (a plain-text book with U+0000 once
 *   decoded, or text of any format with more than 1 % control characters) or the text is only
 *   whitespace.
 */
export function decodeBookText(
  bytes: Uint8Array,
  path: string,
  format: Exclude<BookFormat, "epub">,
): DecodedText {
  let decoded: DecodedText;
  try {
    decoded = decodeBookBytes(bytes, format);
  } catch (error) {
    if (error instanceof BinaryDataError) throw unreadableBook(format, path, error.message, error);
    throw error;
  }
  if (decoded.text.trim() === "") throw unreadableBook(format, path, "the file is empty");
  return decoded;
}

/**
 * Whether a file's bytes are empty or only ASCII whitespace (checked before any format parses).
 *
 * @param bytes the file's bytes.
 * @returns `true` when there is nothing to read.
 */
export function isBlank(bytes: Uint8Array): boolean {
  for (const byte of bytes) {
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) return false;
  }
  return true;
}

async function readAll(
  file: Deno.FsFile,
  path: string,
  format: BookFormat | ArchiveFormat,
  signal: AbortSignal,
  info: Deno.FileInfo,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  // One read buffer, each chunk copied out at its real size: a FIFO yields a few KiB per read, and
  // keeping views into fresh 1 MiB buffers would hold ~1 MiB per read. Sized to a regular file
  // (one byte over, so the next read meets its end): a tiny book allocated and zeroed 1 MiB per
  // read, ~0.3 ms of a ~6 ms job. A file that outgrows its size gets the full chunk.
  const sized = info.isFile && info.size > 0; // not a FIFO, a device or a /proc file
  let buffer = new Uint8Array(sized ? Math.min(CHUNK_BYTES, info.size + 1) : STREAM_CHUNK_BYTES);
  for (;;) {
    const count = await raceAbort(file.read(buffer), signal);
    if (count === null) break;
    total += count;
    // Checked as we go: a FIFO or a device reports size 0 to stat and may never end.
    if (total > MAX_BOOK_BYTES) throw unreadableBook(format, path, tooLarge());
    chunks.push(buffer.slice(0, count));
    // All the bytes fstat said a regular file holds: no read just to be told it ends there.
    if (sized && total === info.size) break;
    if (count === buffer.length && buffer.length < CHUNK_BYTES) {
      buffer = new Uint8Array(CHUNK_BYTES);
    }
  }
  if (chunks.length === 1) return chunks[0];
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

function tooLarge(): string {
  return `the file exceeds the size limit of "${MAX_BOOK_BYTES}" bytes`;
}

/**
 * Settle with `work`, or reject with `signal.reason` the moment the signal aborts, whichever is
 * first. A value `work` yields after the abort goes to `dispose`; a late rejection is dropped.
 */
function raceAbort<T>(
  work: Promise<T>,
  signal: AbortSignal,
  dispose?: (late: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) dispose?.(value);
        else resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
