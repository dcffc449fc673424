/**
 * Giving a burst's memory back once the queues go quiet.
 *
 * What held it, measured by `deno task bench` on a 2,000-job drain of tiny books: the main
 * isolate's V8 heap grew from 40 to about 105 MB, of which 60 MB was garbage of the drain (25 MB
 * live after a full GC, as before it), and V8 collects it only when its memory reducer decides the
 * process is idle, 8 to 10 s after the last job; the extraction worker's isolate (about 70 MB of
 * RSS) is ended by its own idle timer 2 s after the last extraction (books/extract.ts). So once no
 * job has moved for {@linkcode QUIET_MS}, the worker runs one full GC.
 *
 * Startup is a burst too (measured by bench/idle_rss.ts): loading the modules,
 * the migrations and building the routes leave about 4 MB of garbage and 8 MB of empty pages in a
 * 27.5 MB heap, which V8's memory reducer returned only 20 to 30 s after the start (idle RSS 89 MB
 * at 5 s, 80 to 82 MB from 30 s on). main.ts calls {@linkcode IdleCollector.markActive} once everything has started,
 * so the same collection follows {@linkcode QUIET_MS} later. Each collection is logged
 * (`idle gc`, the heap before and after, bytes).
 *
 * `gc` is V8's own, made callable without a command-line flag: `--expose-gc` is set at run time
 * and a fresh `node:vm` context gets the function (the flag is read when a context is created).
 * When that fails (a runtime that refuses it), there is simply no early collection.
 *
 * @module
 */
import v8 from "node:v8";
import vm from "node:vm";
import type { EventHub } from "./events.ts";
import type { Logger } from "./log.ts";

/** How long (ms) no job may move before the collection. */
export const QUIET_MS = 1000;

/**
 * V8's full garbage collection, or null when this runtime does not expose it.
 *
 * @example
 * loadGc()?.();
 */
export function loadGc(): (() => void) | null {
  const global = (globalThis as { gc?: () => void }).gc;
  if (typeof global === "function") return global;
  try {
    v8.setFlagsFromString("--expose-gc");
    const gc: unknown = vm.runInNewContext("gc");
    return typeof gc === "function" ? () => gc() : null;
  } catch {
    return null;
  }
}

/** What {@linkcode collectWhenIdle} returns. */
export interface IdleCollector {
  /** Full collections run so far. */
  readonly collections: number;
  /**
   * Count now as activity, as a job event does: one collection follows once nothing has moved
   * for `quietMs` (main.ts: once the worker has started).
   */
  markActive(): void;
  /** Stop watching (shutdown); a pending collection is dropped. */
  close(): void;
}

/**
 * Run `gc` once after each burst of job events, when none has come for `quietMs`.
 *
 * @param events the process's event hub (every job transition is published there).
 * @param gc the collection, e.g. {@linkcode loadGc}'s; null: watch nothing.
 * @param quietMs quiet time before the collection, ms (default {@linkcode QUIET_MS}).
 * @param log where each collection is logged (`idle gc`, at info), when given.
 * @returns the collector, to close at shutdown.
 * @example
 * const collector = collectWhenIdle(events, loadGc(), QUIET_MS, log);
 * collector.markActive(); // once started: the startup's garbage goes too
 * // … at shutdown:
 * collector.close();
 */
export function collectWhenIdle(
  events: EventHub,
  gc: (() => void) | null,
  quietMs = QUIET_MS,
  log?: Logger,
): IdleCollector {
  let collections = 0;
  let last = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // Unref'd: a pending collection never keeps the process alive.
  const arm = (ms: number) => {
    timer = setTimeout(check, ms);
    Deno.unrefTimer(timer);
  };
  const check = () => {
    const quiet = performance.now() - last;
    if (quiet < quietMs) return arm(quietMs - quiet);
    timer = undefined;
    collections++;
    const before = log && v8.getHeapStatistics().used_heap_size;
    gc!();
    log?.info(
      { heapUsedBefore: before, heapUsedAfter: v8.getHeapStatistics().used_heap_size },
      "idle gc",
    );
  };
  // Moves `last`, arming the one timer of this burst when none is set.
  const active = () => {
    last = performance.now();
    if (timer === undefined) arm(quietMs);
  };
  // A synchronous observer, not a subscription: it must see every event and cost the publishing
  // queue nothing but moving `last` (one timer per burst, not per event).
  const unobserve = gc ? events.observe(active) : () => {};
  let closed = false;
  return {
    get collections() {
      return collections;
    },
    markActive() {
      if (gc && !closed) active();
    },
    close() {
      closed = true;
      unobserve();
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
