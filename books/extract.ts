/**
 * The book-extraction entry point and this folder's public API: `extractBook` runs the extraction
 * (`extract_in_process.ts`) in a Web Worker (`extract_worker.ts`), so a slow or runaway parse never
 * blocks the main thread; the types and the error class are re-exported from `book.ts`. A tiny
 * plain-text book (`INLINE_BOOK_BYTES`) is extracted on the calling thread instead: for such a
 * book the worker's round trip costs more than the parse (issue 11).
 *
 * Why a worker: a 2 MiB HTML file of deeply nested `<div>`s parsed for 17 s on the main thread,
 * and the HTTP API, the queue-lock heartbeat and the 5 s shutdown budget all stalled behind it
 * (field report). An abort cannot interrupt synchronous JavaScript, but it can terminate a worker.
 *
 * Worker lifecycle: one worker is kept and reused, since starting one loads every format reader
 * (~60 ms). A call takes the idle worker, or starts one when there is none (the first call, after
 * an abort, or while another call runs: calls are meant to be sequential, and a concurrent one
 * gets a worker of its own rather than waiting). When a call settles, its worker becomes the idle
 * one, or is terminated when there already is one or when the book was big (`BIG_RESULT_BYTES`). An abort terminates the call's worker; so does
 * a worker that failed. The idle worker is terminated after `IDLE_MS` without a call, by an
 * unref'd timer: an idle Deno worker would otherwise keep `deno run` alive for good.
 * `closeExtractor` terminates it at once.
 *
 * @module
 */
import { extname } from "node:path";
import type { ExtractedBook } from "./book.ts";
import { decodeError, type ExtractRequest, type ExtractResponse } from "./extract_protocol.ts";

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

/**
 * How long the idle worker is kept for the next call, in ms. Back-to-back jobs reuse it; a script
 * that is done exits at most this long after its last call (or at once after `closeExtractor`).
 */
export const IDLE_MS = 2_000;

const WORKER_URL = new URL("./extract_worker.ts", import.meta.url).href;

/**
 * A result this big (chapter html and resources, in bytes) ends its worker instead of idling it:
 * the worker's heap, several times the book, would otherwise stay allocated beside the main
 * thread's copy of the result while the chapters are saved (issue 10: "peak worker RSS ≤ 300 MB
 * while ingesting a 10 MB book"). Starting the next worker costs ~60 ms; a big book takes seconds.
 */
export const BIG_RESULT_BYTES = 4 * 1024 * 1024;

/**
 * A plain-text book at most this big (bytes) is extracted on the calling thread, not in the worker
 * (issue 11): for a tiny book the round trip to the worker (the request, the book cloned back, the
 * worker's turn) cost ~0.4 ms, more than the parse, and the text reader is linear, so the longest
 * stall this allows is a few ms (the worst inputs measured: README "Cost per job"). Markdown and
 * HTML always go to the worker: their parsers have inputs a few KiB long that take hundreds of ms
 * (nested lists, nested elements); so does an EPUB, a small archive of a big book.
 */
export const INLINE_BOOK_BYTES = 4 * 1024;

/** The size of a book's chapter html (as UTF-16, ×2) and resources, in bytes. */
function resultBytes(book: ExtractedBook): number {
  let bytes = 0;
  for (const chapter of book.chapters) bytes += 2 * (chapter.html.length + chapter.title.length);
  for (const resource of book.resources ?? []) bytes += resource.bytes.length;
  return bytes;
}

/** How a request ends: the worker's answer, or an error (an abort reason, a broken worker). */
type Outcome = { response: ExtractResponse } | { error: unknown };

/** One worker and the request it is answering, if any. */
class ExtractorWorker {
  readonly #worker = new Worker(WORKER_URL, { type: "module" });
  /** Settles the request in flight; `null` while idle. */
  #settle: ((outcome: Outcome) => void) | null = null;
  #terminated = false;

  constructor() {
    this.#worker.onmessage = (event: MessageEvent<ExtractResponse>) => {
      this.#finish({ response: event.data });
    };
    this.#worker.onmessageerror = () => {
      this.#fail(new Error("Cannot extract book: the extraction worker's answer was unreadable"));
    };
    this.#worker.onerror = (event: ErrorEvent) => {
      // Handled here: unprevented, a worker's error event is rethrown in the main thread.
      event.preventDefault();
      this.#fail(new Error(`Cannot extract book: the extraction worker failed: ${event.message}`));
    };
  }

  /** Whether the worker is gone (terminated, or failed) and must not be reused. */
  get terminated(): boolean {
    return this.#terminated;
  }

  /**
   * Ask the worker to extract `path`: resolves with its answer, rejects with `signal.reason` as
   * soon as the signal aborts (the caller then terminates this worker), or with an Error when the
   * worker fails.
   */
  extract(path: string, signal: AbortSignal): Promise<ExtractResponse> {
    return new Promise<ExtractResponse>((resolve, reject) => {
      const onAbort = (): void => this.#finish({ error: signal.reason });
      this.#settle = (outcome) => {
        signal.removeEventListener("abort", onAbort);
        if ("response" in outcome) resolve(outcome.response);
        else reject(outcome.error);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const request: ExtractRequest = { path };
      this.#worker.postMessage(request);
    });
  }

  /** Stop the worker, mid-parse or idle; a request in flight rejects. */
  terminate(): void {
    this.#terminated = true;
    this.#worker.terminate();
    this.#finish({ error: new Error("Cannot extract book: the extraction worker was terminated") });
  }

  /** Settle the request in flight, if any; a late answer after an abort is dropped here. */
  #finish(outcome: Outcome): void {
    const settle = this.#settle;
    this.#settle = null;
    settle?.(outcome);
  }

  /** The worker is broken: never reuse it; the request in flight rejects with `error`. */
  #fail(error: Error): void {
    this.#terminated = true;
    this.#worker.terminate();
    this.#finish({ error });
  }
}

let idle: ExtractorWorker | null = null;
let idleTimer: ReturnType<typeof setTimeout> | undefined;

/**
 * Read a book file into its title, author and chapters, in the extraction worker.
 *
 * The format comes from the extension (case-insensitive): `.txt` text, `.md`/`.markdown`
 * Markdown, `.html`/`.htm`/`.xhtml` HTML, `.epub` EPUB. Text formats are decoded as they declare,
 * else as UTF-8, else as detected (`books/decode.ts`; a guess is a warning). Chapter html
 * is always sanitised (see `books/sanitize.ts`). No string in the result holds U+0000: a plain
 * text file with a NUL byte is refused, and in the markup formats U+0000 becomes U+FFFD.
 *
 * @param path the book file; a FIFO works, read until its writer closes it.
 * @param signal aborts the extraction promptly wherever it is (opening a FIFO, reading, parsing):
 *   the worker is terminated.
 * @returns the book, with at least one chapter.
 * @throws UnreadableBookError (permanent: fail the job, do not retry) when the extension is not a
 *   known format, the file is missing, is a directory, is over 256 MiB, is empty or only
 *   whitespace, is binary data (plain text with a NUL byte, or control characters), is a broken
 *   EPUB, cannot be parsed (markup nested more than 512 deep, a stack overflow, or any other throw
 *   while parsing: `Cannot read HTML "x.html": the file could not be parsed: <why>`), or yields no
 *   chapters.
 * @throws `signal.reason` (an `AbortError` `DOMException` by default) when the signal aborts.
 * @throws any other error from the file system, rebuilt with its class (`Deno.errors.*`) or else
 *   its name, and its message and `code` (e.g. `Deno.errors.NotCapable`, an `EIO` error); or an
 *   `Error` when the worker itself fails: transient, worth a retry.
 * @example
 * const book = await extractBook("/srv/uploads/moby_dick.epub", signal);
 * console.log(book.title, book.chapters.length);
 */
export async function extractBook(path: string, signal: AbortSignal): Promise<ExtractedBook> {
  signal.throwIfAborted();
  const small = await extractSmallBook(path, signal);
  if (small) return small;
  const worker = takeWorker();
  let response: ExtractResponse;
  try {
    response = await worker.extract(path, signal);
  } catch (error) {
    // Aborted (the parse may still be running) or broken: this worker is done either way.
    worker.terminate();
    throw error;
  }
  if (response.ok && resultBytes(response.book) >= BIG_RESULT_BYTES) worker.terminate();
  else keepWorker(worker);
  if (response.ok) return response.book;
  throw decodeError(response.error);
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
 *   file, not a regular file, or one `stat` cannot see): the worker then reads it and reports its
 *   errors.
 * @throws what `extractInProcess` throws for the file.
 */
async function extractSmallBook(path: string, signal: AbortSignal): Promise<ExtractedBook | null> {
  if (extname(path).toLowerCase() !== ".txt") return null;
  // stat, not open: opening a FIFO blocks until a writer comes, and `stat` never does. Its size
  // spares a big book a read here before the worker's.
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
 * Terminate the idle extraction worker now instead of after `IDLE_MS`, e.g. before a script or a
 * test file ends. A call in flight keeps its worker; once it settles, that worker idles as usual.
 */
export function closeExtractor(): void {
  clearTimeout(idleTimer);
  idleTimer = undefined;
  idle?.terminate();
  idle = null;
}

function takeWorker(): ExtractorWorker {
  clearTimeout(idleTimer);
  idleTimer = undefined;
  // An idle worker can have failed (its error event) since its last call.
  const worker = idle !== null && !idle.terminated ? idle : new ExtractorWorker();
  idle = null;
  return worker;
}

/** Make a worker whose call settled the idle one, or terminate it when there already is one. */
function keepWorker(worker: ExtractorWorker): void {
  if (worker.terminated) return;
  if (idle !== null) {
    worker.terminate();
    return;
  }
  idle = worker;
  clearTimeout(idleTimer);
  const timer = setTimeout(closeExtractor, IDLE_MS);
  // The worker already keeps the process alive; the timer must not add to that.
  Deno.unrefTimer(timer);
  idleTimer = timer;
}
