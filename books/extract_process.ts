/**
 * The parent side of the book-extraction child process (books/extract_child.ts): spawning it with
 * its heap bound (`--max-old-space-size`), one framed request and answer at a time over its stdin
 * and stdout, telling an out-of-memory death from any other, and killing it on abort. Which child
 * runs a book, and when an idle one is kept, is books/extract.ts's.
 *
 * @module
 */
import { sourceFormat, unreadableBook } from "./book.ts";
import {
  decodeAnswer,
  type ExtractRequest,
  type ExtractResponse,
  FRAME_HEADER_BYTES,
  frameLength,
} from "./extract_protocol.ts";

/**
 * The child's V8 old-generation limit, MiB (`--max-old-space-size`). A 10 MB book's extraction
 * peaks well under it; the hostile inputs it exists for need gigabytes.
 */
export const CHILD_HEAP_MB = 384;

/**
 * The largest answer (the serialised book) taken from the child, bytes: a bigger one is refused
 * before it is read, so this process never holds more than this of a book it has not asked for.
 */
export const MAX_ANSWER_BYTES = 128 * 1024 * 1024;

export const CHILD_MODULE = new URL("./extract_child.ts", import.meta.url).pathname;

export const CONFIG = new URL("../deno.json", import.meta.url).pathname;

/** Bytes of the child's stderr kept, its last ones: enough for V8's fatal-error banner. */
export const STDERR_TAIL_BYTES = 8 * 1024;

/** V8's words for a heap that hit its limit (`Fatal JavaScript out of memory: …`). */
export const OUT_OF_MEMORY = /out of memory|heap limit|allocation failed/i;

/** One child process and the request it is answering, if any. */
export class ExtractorChild {
  readonly #process: Deno.ChildProcess;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #stdout: ReadableStreamDefaultReader<Uint8Array>;
  /** Bytes read from stdout past the last complete frame. */
  #buffered: Uint8Array = new Uint8Array();
  #stderrTail = "";
  /** Settles once the child has exited and its stderr is read to the end. */
  readonly #exited: Promise<Deno.CommandStatus>;
  #killed = false;

  constructor() {
    this.#process = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--frozen",
        "--no-prompt",
        // Reading a book is all it does, but a `/proc` file (a book that outgrew its size) needs
        // every permission in Deno; `extractBook` checks this process's read permission first.
        "--allow-all",
        "--config",
        CONFIG,
        `--v8-flags=--max-old-space-size=${CHILD_HEAP_MB},--max-semi-space-size=4`,
        CHILD_MODULE,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#stdin = this.#process.stdin.getWriter();
    this.#stdout = this.#process.stdout.getReader();
    const stderr = this.#readStderr();
    this.#exited = Promise.all([this.#process.status, stderr]).then(([status]) => status);
  }

  /** Whether the child is gone (killed, or failed) and must not be reused. */
  get terminated(): boolean {
    return this.#killed;
  }

  /**
   * Ask the child to extract `path`: resolves with its answer, rejects with `signal.reason` as
   * soon as the signal aborts (the caller then kills this child), with an `UnreadableBookError`
   * when the child ran out of memory or its answer is over `MAX_ANSWER_BYTES`, or with an Error
   * when the child failed otherwise.
   */
  async extract(path: string, signal: AbortSignal): Promise<ExtractResponse> {
    const exchange = this.#exchange({ path }, path);
    let onAbort = (): void => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    aborted.catch(() => {});
    exchange.catch(() => {}).finally(() => signal.removeEventListener("abort", onAbort));
    return await Promise.race([exchange, aborted]);
  }

  /** Kill the child, mid-parse or idle (SIGKILL: nothing of it runs on). */
  terminate(): void {
    if (this.#killed) return;
    this.#killed = true;
    try {
      this.#process.kill("SIGKILL");
    } catch {
      // Already exited.
    }
    this.#stdin.close().catch(() => {});
  }

  async #exchange(request: ExtractRequest, path: string): Promise<ExtractResponse> {
    try {
      await this.#stdin.write(new TextEncoder().encode(`${JSON.stringify(request)}\n`));
      const header = await this.#read(FRAME_HEADER_BYTES);
      const length = frameLength(header);
      if (length > MAX_ANSWER_BYTES) {
        this.terminate();
        throw tooBig(path, length);
      }
      return decodeAnswer(await this.#read(length));
    } catch (error) {
      if (error instanceof ChildEnded) throw await this.#death(path);
      throw error;
    }
  }

  /** Exactly `length` bytes from stdout; throws `ChildEnded` when it closes first. */
  async #read(length: number): Promise<Uint8Array> {
    const out = new Uint8Array(length);
    let filled = Math.min(length, this.#buffered.length);
    out.set(this.#buffered.subarray(0, filled));
    this.#buffered = this.#buffered.subarray(filled);
    while (filled < length) {
      const { value, done } = await this.#stdout.read();
      if (done) throw new ChildEnded();
      const take = Math.min(length - filled, value.length);
      out.set(value.subarray(0, take), filled);
      filled += take;
      if (take < value.length) this.#buffered = value.slice(take);
    }
    return out;
  }

  /** Why the child ended mid-request, as the error the request rejects with. */
  async #death(path: string): Promise<Error> {
    this.#killed = true;
    const status = await this.#exited;
    const how = status.signal !== null ? `signal ${status.signal}` : `exit code ${status.code}`;
    if (OUT_OF_MEMORY.test(this.#stderrTail)) {
      const format = sourceFormat(path) ?? "text";
      return unreadableBook(
        format,
        path,
        `the book is too complex to read: reading it needed more than ${CHILD_HEAP_MB} MiB of memory`,
      );
    }
    const said = this.#stderrTail.trim().split("\n").slice(-3).join(" ").slice(0, 500);
    return new Error(
      `Cannot extract book: the extraction process ended (${how})${said ? `: ${said}` : ""}`,
    );
  }

  async #readStderr(): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of this.#process.stderr) {
        this.#stderrTail = (this.#stderrTail + decoder.decode(chunk, { stream: true }))
          .slice(-STDERR_TAIL_BYTES);
      }
    } catch {
      // Killed: what was read is all there is.
    }
  }
}

/** The child's stdout closed before a whole answer came. */
export class ChildEnded extends Error {}

export function tooBig(path: string, length: number): Error {
  const format = sourceFormat(path) ?? "text";
  const mib = (bytes: number) => Math.ceil(bytes / 1024 / 1024);
  return unreadableBook(
    format,
    path,
    `the book is too big to read: its chapters and files come to ${mib(length)} MiB, more than ${
      mib(MAX_ANSWER_BYTES)
    } MiB`,
  );
}
