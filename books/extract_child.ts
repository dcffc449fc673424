/**
 * The extraction child: a Deno process of its own that runs `extractInProcess` for `extractBook`
 * (`extract.ts`), started with a bounded V8 heap (`CHILD_HEAP_MB`), so a book whose parse blows
 * up (millions of tiny elements inside the zip limits) ends this process, never the worker's.
 *
 * Protocol (`extract_protocol.ts`): one JSON request per line on stdin; one framed answer per
 * request on stdout (a 4-byte big-endian length, then the `node:v8`-serialised
 * `ExtractResponse`). Nothing else may reach stdout, so console output goes to stderr. Stdin's end
 * (the worker closed it, or exited) ends this process. It never cancels anything itself: to abort,
 * the worker kills it, which also stops a parse in progress.
 *
 * @module
 */
import { extractInProcess } from "./extract_in_process.ts";
import {
  encodeAnswer,
  encodeError,
  type ExtractRequest,
  type ExtractResponse,
} from "./extract_protocol.ts";

// stdout carries only frames.
for (const name of ["log", "info", "debug", "warn"] as const) console[name] = console.error;

// A terminal's Ctrl-C reaches the whole process group, a closed terminal's SIGHUP every job of its
// shell, and systemd's default KillMode sends SIGTERM to every process of the unit: this child
// would die mid-book before the worker, which got the same signal, had aborted the run, and the
// run would fail with "the extraction process ended" instead of being given back (ADR-022: a
// deploy never fails a job). The worker ends this child (SIGKILL on abort, or its stdin's end);
// these three signals are the worker's (lib/lifecycle.ts shuts down on each).
for (const name of ["SIGINT", "SIGTERM", "SIGHUP"] as const) Deno.addSignalListener(name, () => {});

/** Never aborts: cancelling is killing this process, not a signal. */
const NEVER = new AbortController().signal;

/** The requests on stdin, one per line, as they arrive. */
async function* requests(): AsyncGenerator<ExtractRequest> {
  let pending = "";
  for await (const text of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    pending += text;
    let end: number;
    while ((end = pending.indexOf("\n")) !== -1) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      if (line !== "") yield JSON.parse(line) as ExtractRequest;
    }
  }
}

for await (const request of requests()) {
  let response: ExtractResponse;
  try {
    response = { ok: true, book: await extractInProcess(request.path, NEVER) };
  } catch (error) {
    response = { ok: false, error: encodeError(error) };
  }
  const frame = encodeAnswer(response);
  for (let written = 0; written < frame.length;) {
    written += await Deno.stdout.write(frame.subarray(written));
  }
}
// Stdin ended: the worker closed it or exited. The signal listeners must not keep this running.
Deno.exit(0);
