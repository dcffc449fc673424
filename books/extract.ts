/**
 * The book-extraction entry point and this folder's public API: `extractBook` runs the extraction
 * (`extract_in_process.ts`) in a child process (`extract_child.ts`) whose V8 heap is bounded
 * (`CHILD_HEAP_MB`); the types and the error class are re-exported from `book.ts`. A tiny
 * plain-text book (`INLINE_BOOK_BYTES`) is extracted on the calling thread instead: for such a
 * book the round trip costs more than the parse, and the text reader's memory is linear in its
 * 4 KiB input.
 *
 * Why a process: a 2 MiB HTML file of deeply nested `<div>`s parsed for 17 s on the main thread,
 * and the HTTP API, the queue-lock heartbeat and the 5 s shutdown budget all stalled behind it
 * (field report); and an EPUB of ~100 KB whose chapter expands, inside the zip limits, into
 * millions of tiny elements grows the heap past 4 GB until V8 aborts the process that parses
 * it. A Web Worker bounds neither: an abort can terminate it, but it shares the process's heap
 * limit, and V8's fatal out-of-memory ends the whole process. A child with
 * `--max-old-space-size` dies alone; its death is the book's fault (`UnreadableBookError`, the job
 * fails on its first attempt), and its memory goes back to the system at once.
 *
 * Memory: one extraction runs at a time (a second call waits for the first to settle), so the
 * process group holds at most this process and one child (heap `CHILD_HEAP_MB`, plus the book's
 * bytes and its answer, at most `MAX_ANSWER_BYTES`).
 *
 * Child lifecycle: one child is kept and reused, since starting one costs a process and the
 * loading of every format reader (~90 ms). A call takes the idle child or starts one. When a call
 * settles, its child becomes the idle one, or is killed when the book was big
 * (`BIG_RESULT_BYTES`). An abort kills the call's child (SIGKILL: a parse stops at once); so does
 * a child that failed. The idle child is killed after `IDLE_MS` without a call, by an unref'd
 * timer (so a script exits at most that long after its last call); a child also exits by itself
 * when its stdin closes (this process ended). `closeExtractor` kills it at once.
 *
 * @module
 */
import { extname } from "node:path";
import type { ExtractedBook } from "./book.ts";
import { decodeError, type ExtractResponse } from "./extract_protocol.ts";
import { ExtractorChild } from "./extract_process.ts";

export type {
  BookFormat,
  BookResource,
  BookWarning,
  BookWarningKind,
  ExtractedBook,
  ExtractedChapter,
  TextDirection,
} from "./book.ts";
export { UnreadableBookError } from "./book.ts";
export { CHILD_HEAP_MB, MAX_ANSWER_BYTES } from "./extract_process.ts";

/**
 * How long the idle child is kept for the next call, in ms. Back-to-back jobs reuse it; a script
 * that is done exits at most this long after its last call (or at once after `closeExtractor`).
 */
export const IDLE_MS = 2_000;

/**
 * A result this big (chapter html and resources, in bytes) ends its child instead of idling it:
 * the child's heap, several times the book, would otherwise stay allocated beside this process's
 * copy of the result while the chapters are saved ("peak worker RSS ≤ 300 MB while
 * ingesting a 10 MB book"). Starting the next child costs ~90 ms; a big book takes seconds.
 */
export const BIG_RESULT_BYTES = 4 * 1024 * 1024;

/**
 * A plain-text book at most this big (bytes) is extracted on the calling thread, not in the child:
 * for a tiny book the round trip (the request, the book serialised back, the child's
 * turn) costs more than the parse, and the text reader is linear in time and memory, so the
 * longest stall this allows is a few ms (the worst inputs measured: `deno task bench`, docs/performance.md) and
 * its memory a small multiple of 4 KiB. Markdown and HTML always go to the child: their parsers
 * have inputs a few KiB long that take hundreds of ms (nested lists, nested elements); so does an
 * EPUB, a small archive of a big book.
 */
export const INLINE_BOOK_BYTES = 4 * 1024;

/** The size of a book's chapter html (as UTF-16, ×2) and resources, in bytes. */
function resultBytes(book: ExtractedBook): number {
  let bytes = 0;
  for (const chapter of book.chapters) bytes += 2 * (chapter.html.length + chapter.title.length);
  for (const resource of book.resources ?? []) bytes += resource.bytes.length;
  return bytes;
}

let idle: ExtractorChild | null = null;
let idleTimer: ReturnType<typeof setTimeout> | undefined;

/**
 * Read a book file into its title, author and chapters, in the extraction child process.
 *
 * The format comes from the extension (case-insensitive): `.txt` text, `.md`/`.markdown`
 * Markdown, `.html`/`.htm`/`.xhtml` HTML, `.epub` EPUB. Text formats are decoded as they declare,
 * else as UTF-8, else as detected (`books/decode.ts`; a guess is a warning). Chapter html
 * is always sanitised (see `books/sanitize.ts`). No string in the result holds U+0000: a plain
 * text file with a NUL byte is refused, and in the markup formats U+0000 becomes U+FFFD.
 *
 * @param path the book file; a FIFO works, read until its writer closes it.
 * @param signal aborts the extraction promptly wherever it is (opening a FIFO, reading, parsing):
 *   the child is killed.
 * @returns the book, with at least one chapter.
 * @throws UnreadableBookError (permanent: fail the job, do not retry) when the extension is not a
 *   known format, the file is missing, is a directory, is over 256 MiB, is empty or only
 *   whitespace, is binary data (plain text with a NUL byte, or control characters), is a broken
 *   EPUB, cannot be parsed (markup nested more than 512 deep, a stack overflow, or any other throw
 *   while parsing: `Cannot read HTML "x.html": the file could not be parsed: <why>`), needs more
 *   memory than `CHILD_HEAP_MB` to parse (`…: the book is too complex to read: …`), comes to an
 *   answer over `MAX_ANSWER_BYTES`, or yields no chapters.
 * @throws `signal.reason` (an `AbortError` `DOMException` by default) when the signal aborts.
 * @throws any other error from the file system, rebuilt with its class (`Deno.errors.*`) or else
 *   its name, and its message and `code` (e.g. `Deno.errors.NotCapable`, an `EIO` error); or an
 *   `Error` when the child fails otherwise (it ended by a signal not its own): transient, worth
 *   a retry.
 * @example
 * const book = await extractBook("/srv/uploads/moby_dick.epub", signal);
 * console.log(book.title, book.chapters.length);
 */
export async function extractBook(path: string, signal: AbortSignal): Promise<ExtractedBook> {
  signal.throwIfAborted();
  const small = await extractSmallBook(path, signal);
  if (small) return small;
  // The child runs with every permission; a read this process may not make, it must not either.
  if (Deno.permissions.querySync({ name: "read", path }).state !== "granted") {
    throw new Deno.errors.NotCapable(`Requires read access to "${path}"`);
  }
  return await oneAtATime(signal, async () => {
    const child = takeChild();
    let response: ExtractResponse;
    try {
      response = await child.extract(path, signal);
    } catch (error) {
      // Aborted (the parse may still be running), out of memory or broken: done either way.
      child.terminate();
      throw error;
    }
    if (response.ok && resultBytes(response.book) >= BIG_RESULT_BYTES) child.terminate();
    else keepChild(child);
    if (response.ok) return response.book;
    throw decodeError(response.error);
  });
}

/** Settles when every extraction begun so far has settled. */
let turn: Promise<void> = Promise.resolve();

/**
 * Run `work` once every extraction begun before it has settled: one child at a time, so the
 * process group's memory holds one book's extraction, never two.
 *
 * @throws `signal.reason` when the signal aborts while waiting (the turn is passed on).
 */
async function oneAtATime<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  let done!: () => void;
  const mine = new Promise<void>((resolve) => done = resolve);
  const before = turn;
  turn = before.then(() => mine);
  try {
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      before.then(() => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      });
    });
    signal.throwIfAborted();
    return await work();
  } finally {
    done();
  }
}

/** The modules {@linkcode extractSmallBook} uses, once loaded (an `import()` costs ~25 µs a call). */
let inlineReader:
  | Promise<[typeof import("./read.ts"), typeof import("./extract_in_process.ts")]>
  | undefined;

/**
 * Extract a plain-text book of at most {@linkcode INLINE_BOOK_BYTES} on this thread. Its reader
 * loads on first use, so a process that never reads a small book never holds it.
 *
 * @returns the book; null when the file is not such a book (another format, a bigger or growing
 *   file, not a regular file, or one `stat` cannot see): the child then reads it and reports its
 *   errors.
 * @throws what `extractInProcess` throws for the file.
 */
async function extractSmallBook(path: string, signal: AbortSignal): Promise<ExtractedBook | null> {
  if (extname(path).toLowerCase() !== ".txt") return null;
  // stat, not open: opening a FIFO blocks until a writer comes, and `stat` never does. Its size
  // spares a big book a read here before the child's.
  const info = await Deno.stat(path).catch(() => null);
  if (!info?.isFile || info.size > INLINE_BOOK_BYTES) return null;
  const [{ readBookFile }, { parseBook }] = await (inlineReader ??= Promise.all([
    import("./read.ts"),
    import("./extract_in_process.ts"),
  ]));
  const bytes = await readBookFile(path, "text", signal);
  // Bigger than stat said (it grew, or it is a /proc file, sized 0): its parse belongs where it
  // cannot stall this thread.
  if (bytes.length > INLINE_BOOK_BYTES) return null;
  return parseBook("text", bytes, path, signal);
}

/**
 * Kill the idle extraction child now instead of after `IDLE_MS`, e.g. before a script or a test
 * file ends. A call in flight keeps its child; once it settles, that child idles as usual.
 */
export function closeExtractor(): void {
  clearTimeout(idleTimer);
  idleTimer = undefined;
  idle?.terminate();
  idle = null;
}

function takeChild(): ExtractorChild {
  clearTimeout(idleTimer);
  idleTimer = undefined;
  // An idle child can have died since its last call.
  const child = idle !== null && !idle.terminated ? idle : new ExtractorChild();
  idle = null;
  return child;
}

/** Make a child whose call settled the idle one, or kill it when there already is one. */
function keepChild(child: ExtractorChild): void {
  if (child.terminated) return;
  if (idle !== null) {
    child.terminate();
    return;
  }
  idle = child;
  clearTimeout(idleTimer);
  const timer = setTimeout(closeExtractor, IDLE_MS);
  Deno.unrefTimer(timer);
  idleTimer = timer;
}
