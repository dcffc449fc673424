/**
 * The hosted drain of ADR-052: one reader loop per {@link BoundedChannel}, owned by the process
 * lifecycle so shutdown can cancel it, wait for it within a budget and say what it abandoned.
 * Nothing starts an untracked promise: the loop's promise is kept and raced against the deadline
 * in `stop()`.
 *
 * @module
 */
import type { BoundedChannel } from "./channel.ts";
import type { Logger } from "./log.ts";

/**
 * How to build a {@link Drain}.
 *
 * @example
 * const options: DrainOptions<string> = { name: "broadcast", channel, handle: publish, log };
 */
export interface DrainOptions<T> {
  /** Logged as `drain` on every line and used in error messages. */
  name: string;
  /** The channel this drain is the single reader of. */
  channel: BoundedChannel<T>;
  /**
   * Runs one item. `signal` aborts when the drain stops (or, for items drained at shutdown, when
   * the budget runs out); a rejection with that abort is shutdown, not failure.
   */
  handle: (item: T, signal: AbortSignal) => Promise<void>;
  /** Where the drain logs; see `lib/log.ts`. */
  log: Logger;
  /**
   * Least time between two "drain channel dropped items" warnings, in ms; default 10_000. Each
   * warning carries the count dropped since the previous one.
   */
  dropLogIntervalMs?: number;
}

/**
 * What `stop()` reports.
 *
 * @example
 * const { abandoned }: DrainStopResult = await drain.stop(5_000);
 */
export interface DrainStopResult {
  /**
   * Items never handled to the end: the in-flight item cut off by the abort (or still running at
   * the deadline), items cut off or still queued when the budget ran out.
   */
  abandoned: number;
}

type Outcome = "handled" | "failed" | "cut-off";

// Setting a timer beyond a 32-bit signed delay fires it at once rather than never.
const maxTimerMs = 2_147_483_647;

/**
 * A single-reader loop over a channel that handles one item at a time, catches per item, and stops
 * within a budget (ADR-052).
 *
 * @param options `{ name, channel, handle, log, dropLogIntervalMs? }`; see {@link DrainOptions}.
 * @throws {RangeError} when `dropLogIntervalMs` is not a positive number of ms (at most 2^31 - 1).
 * @example
 * const channel = new BoundedChannel<Broadcast>({ capacity: 256, mode: "drop-oldest" });
 * const drain = new Drain({ name: "broadcast", channel, handle: publish, log });
 * drain.start();
 * // … producers call channel.tryWrite(message) …
 * const { abandoned } = await drain.stop(5_000);
 */
export class Drain<T> {
  /** Logged as `drain` on every line. */
  readonly name: string;

  readonly #channel: BoundedChannel<T>;
  readonly #handle: (item: T, signal: AbortSignal) => Promise<void>;
  readonly #log: Logger;
  readonly #dropLogIntervalMs: number;
  readonly #stopping = new AbortController();
  #loop: Promise<void> | undefined;
  #stopped: Promise<DrainStopResult> | undefined;
  #inFlight = false;
  #cutOff = 0;
  #dropTimer: ReturnType<typeof setInterval> | undefined;
  #dropsLogged = 0;

  /**
   * Build a drain; nothing runs until `start()`.
   *
   * @param options `{ name, channel, handle, log, dropLogIntervalMs? }` (interval in ms).
   * @throws {RangeError} when `dropLogIntervalMs` is not a positive number of ms.
   */
  constructor(options: DrainOptions<T>) {
    this.name = options.name;
    this.#channel = options.channel;
    this.#handle = options.handle;
    this.#log = options.log;
    const interval = options.dropLogIntervalMs ?? 10_000;
    if (!(interval > 0 && interval <= maxTimerMs)) {
      throw new RangeError(
        `Cannot create drain "${this.name}": expected dropLogIntervalMs to be a positive number of ms up to ${maxTimerMs}, received ${
          String(options.dropLogIntervalMs)
        }`,
      );
    }
    this.#dropLogIntervalMs = interval;
  }

  /**
   * Start the reader loop and the rate-limited drop log.
   *
   * @returns nothing; the loop runs until `stop()` or until the channel reaches end-of-stream.
   * @throws {Error} when the drain was already started or stopped.
   * @example
   * drain.start();
   */
  start(): void {
    if (this.#stopped) throw new Error(`Cannot start drain "${this.name}": it was stopped`);
    if (this.#loop) throw new Error(`Cannot start drain "${this.name}": it is already running`);
    // Drop-mode writes report success, so the channel's own count is the only signal that work is
    // being lost (ADR-052); reading it here means no drain can forget to wire it to a log. One
    // timer per drain, unref'd so a missed stop() cannot hold the process open.
    const dropTimer = setInterval(() => this.#logDrops(), this.#dropLogIntervalMs);
    Deno.unrefTimer(dropTimer);
    this.#dropTimer = dropTimer;
    this.#loop = this.#run();
  }

  /**
   * Settles when the reader loop has ended: the channel reached end-of-stream (its producer
   * completed it) or `stop()` aborted it. Never rejects.
   *
   * @example
   * drain.start();
   * await drain.done; // e.g. the stream this drain feeds has closed
   */
  get done(): Promise<void> {
    return this.#loop ?? Promise.resolve();
  }

  /**
   * Stop within a budget: complete the channel (parked writers are refused at once), abort the
   * in-flight item, and — only if the loop returned before the deadline — handle what is still
   * queued, each item with a fresh signal that aborts at the deadline (ADR-052, revision
   * 2026-10-21). Logs "drain stopped" with `{ drain, abandoned, drained, dropped, elapsedMs }`
   * (`dropped`: drops not yet in a warning), at warn when anything was abandoned. Idempotent:
   * later calls return the first call's promise.
   *
   * @param budgetMs the whole stop's deadline in ms, a finite number ≥ 0. The returned promise
   *   settles at about `budgetMs` at most: a handler that ignores its signal is left running, not
   *   awaited.
   * @returns a promise of `{ abandoned }`: items never handled to the end.
   * @throws {RangeError} (as a rejection) when `budgetMs` is negative, not finite, or over
   *   2^31 - 1 ms.
   * @example
   * const { abandoned } = await drain.stop(5_000);
   */
  stop(budgetMs: number): Promise<DrainStopResult> {
    if (!(Number.isFinite(budgetMs) && budgetMs >= 0 && budgetMs <= maxTimerMs)) {
      return Promise.reject(
        new RangeError(
          `Cannot stop drain "${this.name}": expected budgetMs to be a number of ms from 0 to ${maxTimerMs}, received ${
            String(budgetMs)
          }`,
        ),
      );
    }
    this.#stopped ??= this.#shutdown(budgetMs);
    return this.#stopped;
  }

  async #run(): Promise<void> {
    const signal = this.#stopping.signal;
    try {
      while (await this.#channel.waitToRead(signal)) {
        // Checked before every dequeue (ADR-052, revision 2026-10-21): once stop() has begun, what
        // is left belongs to the budgeted drain, which hands each item a live signal.
        while (!signal.aborted) {
          const next = this.#channel.tryRead();
          if (!next.ok) break;
          this.#inFlight = true;
          const outcome = await this.#handleOne(next.value, signal);
          this.#inFlight = false;
          if (outcome === "cut-off") this.#cutOff++;
        }
      }
    } catch (err) {
      // waitToRead rejects with the abort reason when stop() aborts an idle wait; anything else
      // (a second reader on the channel) is a bug worth an error line.
      if (!signal.aborted) this.#log.error({ drain: this.name, err }, "drain loop failed");
    }
    // A loop that ended on its own (its producer completed the channel) is never stopped: report
    // what it dropped and free its timer here.
    if (!this.#stopped) {
      clearInterval(this.#dropTimer);
      this.#logDrops();
    }
    this.#log.debug({ drain: this.name }, "drain loop ended");
  }

  async #shutdown(budgetMs: number): Promise<DrainStopResult> {
    const startedAt = performance.now();
    clearInterval(this.#dropTimer);
    // One deadline for the whole stop, shared by the wait for the loop and the drain that
    // follows, so their sum can never exceed the budget.
    const budget = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<"deadline">((resolve) => {
      timer = setTimeout(() => {
        budget.abort(
          new DOMException(`Drain "${this.name}" ran out of its shutdown budget`, "AbortError"),
        );
        resolve("deadline");
      }, budgetMs);
    });
    let abandoned = 0;
    let drained = 0;
    try {
      this.#channel.complete();
      this.#stopping.abort(new DOMException(`Drain "${this.name}" is stopping`, "AbortError"));
      // Not started counts as returned: whatever was queued is still drained within the budget.
      const loop = this.#loop ?? Promise.resolve();
      const first = await Promise.race([loop.then(() => "returned" as const), deadline]);
      if (first === "deadline") {
        // The in-flight handler ignored its abort; it keeps running, and the loop will not read
        // again once it returns, so everything queued is abandoned.
        abandoned = this.#cutOff + (this.#inFlight ? 1 : 0) + this.#channel.size;
      } else {
        abandoned = this.#cutOff;
        for (let next = this.#channel.tryRead(); next.ok; next = this.#channel.tryRead()) {
          const outcome = budget.signal.aborted
            ? "deadline"
            : await Promise.race([this.#handleOne(next.value, budget.signal), deadline]);
          if (outcome === "handled" || outcome === "failed") {
            drained++;
            continue;
          }
          abandoned += 1 + this.#channel.size;
          break;
        }
      }
    } finally {
      clearTimeout(timer);
    }
    const fields = {
      drain: this.name,
      abandoned,
      drained,
      dropped: this.#takeUnloggedDrops(),
      elapsedMs: Math.round(performance.now() - startedAt),
    };
    if (abandoned > 0) this.#log.warn(fields, "drain stopped");
    else this.#log.info(fields, "drain stopped");
    return { abandoned };
  }

  // Never rejects: one item's failure must not end the loop (ADR-052: catch per item).
  async #handleOne(item: T, signal: AbortSignal): Promise<Outcome> {
    try {
      await this.#handle(item, signal);
      return "handled";
    } catch (err) {
      // A graceful restart is not a failure (ADR-052): keep it out of the error log.
      if (isAbortOf(err, signal)) {
        this.#log.info({ drain: this.name }, "drain item cancelled by shutdown");
        return "cut-off";
      }
      this.#log.error({ drain: this.name, err }, "drain item failed");
      return "failed";
    }
  }

  #logDrops(): void {
    const dropped = this.#takeUnloggedDrops();
    if (dropped > 0) this.#log.warn({ drain: this.name, dropped }, "drain channel dropped items");
  }

  #takeUnloggedDrops(): number {
    const total = this.#channel.stats().dropped;
    const unlogged = total - this.#dropsLogged;
    this.#dropsLogged = total;
    return unlogged;
  }
}

// Handlers surface an abort in several shapes: the reason itself (signal.throwIfAborted, fetch),
// a library's own AbortError (node:timers/promises), or either wrapped with { cause } (STYLE §6).
function isAbortOf(err: unknown, signal: AbortSignal): boolean {
  if (!signal.aborted) return false;
  let current = err;
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    if (current === signal.reason) return true;
    if ("name" in current && current.name === "AbortError") return true;
    current = "cause" in current ? current.cause : undefined;
  }
  return false;
}
