/**
 * The extraction worker: a Web Worker that runs `extractInProcess` for `extractBook`
 * (`extract.ts`), so parsing a book never blocks the main thread's event loop (the HTTP API, the
 * queue-lock heartbeat, shutdown). It answers each request with the book or the encoded error and
 * then waits for the next; it never cancels anything itself: to abort, the main thread terminates
 * it, which also stops a parse in progress.
 *
 * @module
 */
import { extractInProcess } from "./extract_in_process.ts";
import { encodeError, type ExtractRequest, type ExtractResponse } from "./extract_protocol.ts";

/** The part of the worker global scope this module uses (checked with the window lib). */
interface WorkerScope {
  onmessage: ((event: MessageEvent<ExtractRequest>) => void) | null;
  postMessage(message: ExtractResponse): void;
}

const scope = self as unknown as WorkerScope;

/** Never aborts: cancelling is terminating this worker, not a signal. */
const NEVER = new AbortController().signal;

scope.onmessage = async (event) => {
  let response: ExtractResponse;
  try {
    response = { ok: true, book: await extractInProcess(event.data.path, NEVER) };
  } catch (error) {
    response = { ok: false, error: encodeError(error) };
  }
  scope.postMessage(response);
};
