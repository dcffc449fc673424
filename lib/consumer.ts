/**
 * The sequential consumer and the {@linkcode Queue} contract it drives (ADR-022).
 *
 * One consumer per queue: it takes the queue's advisory lock (standing by while another process
 * holds it), then loops: wait for a wake → recover → claim one job and run it → the end of the
 * job wakes the loop again, so it drains until a claim comes back empty, then waits. A shutdown aborts the running job's signal and gives its claim back; a
 * run that ignores the signal is given back anyway when the budget runs out, and the fence on
 * every settling write keeps that late run from committing.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { QueueDefaults } from "./config.ts";
import type { Logger } from "./log.ts";
import type { Sql } from "./db.ts";
import type { QueueLock } from "./lock.ts";
import { settlesBy } from "./lifecycle.ts";
import type { Wake } from "./wake.ts";
import type { JobEvents } from "./events.ts";

/** What every queue's verbs receive. A queue module may extend it with its own settings. */
export interface QueueContext {
  /** The pool. */
  readonly sql: Sql;
  readonly log: Logger;
  /** This process's per-boot id (uuid), written as `claimed_by` and fenced on by every write. */
  readonly bootId: string;
  /** Where job status transitions are published, after their transaction commits. */
  readonly events: JobEvents;
}

/**
 * A queue's depth, for `/metrics` and `/admin`: counted by the queue module's own statement (each
 * queue exports `stats(sql)`; no generic layer guesses at tables).
 */
export interface QueueStats {
  /** Jobs by status name, every status of the queue present (0 when none). */
  readonly byStatus: Readonly<Record<string, number>>;
  /** Age in seconds of the oldest job that could be claimed now; null when there is none. */
  readonly oldestRunnableAgeS: number | null;
}

/** The least a claimed job carries: its id and the attempt count its claim wrote. */
export interface ClaimedJob {
  /** bigint id, as a string. */
  readonly id: string;
  readonly attempt_count: number;
}

/**
 * One queue: a module in `queues/` exporting these members (STYLE.md §4).
 *
 * - `recover` runs on every wake before the claims (so at consumer start too): the queue's rule
 *   for in-flight rows nobody owns, and any repair of work whose effects did not finish. It
 *   should return promptly once `signal` aborts.
 * - `claim` atomically takes the next job (one statement, SKIP LOCKED) or returns null.
 * - `run` does the work and settles the job with fenced writes. Once `signal` aborts for shutdown
 *   or a lost lock it must reject with the signal's reason without settling anything; when the
 *   reason is a run timeout ({@linkcode isRunTimeout}) it settles the job as the queue sees fit.
 * - `giveBack` returns an aborted job to its queue with a fenced write; false when the claim was
 *   already lost (0 rows), which is logged and never "fixed".
 */
export interface Queue<J extends ClaimedJob, C extends QueueContext> {
  /** Short name for logs and events, e.g. `ingestion`. */
  readonly name: string;
  /** The table; its NOTIFY channel is `<schema>.<table>`. */
  readonly table: string;
  /** Its settings' env prefix and defaults, read by `parseQueueSettings` (lib/config.ts). */
  readonly defaults: QueueDefaults<number | null>;
  recover(ctx: C, signal: AbortSignal): Promise<void>;
  claim(ctx: C): Promise<J | null>;
  run(ctx: C, job: J, signal: AbortSignal): Promise<void>;
  giveBack(ctx: C, job: J): Promise<boolean>;
}

/** Options for {@linkcode Consumer}. */
export interface ConsumerOptions<J extends ClaimedJob, C extends QueueContext> {
  queue: Queue<J, C>;
  ctx: C;
  lock: QueueLock;
  /** This queue's coalescing wake signal, fed by NOTIFY, the poll timer and reconnects. */
  wake: Wake;
  /** Poll interval in ms: a wake is sent this often even without NOTIFY. */
  pollIntervalMs: number;
  /** How often (ms) a standing-by consumer retries the lock. */
  standbyRetryMs: number;
  /**
   * Longest a run may take, in ms: then its signal aborts with a `TimeoutError` DOMException and
   * the queue decides what that means (a stuck run must not hold a sequential queue forever).
   */
  runTimeoutMs: number;
}

/** Whether an abort reason is a run timeout (as opposed to shutdown or a lost lock). */
export function isRunTimeout(reason: unknown): boolean {
  return reason instanceof DOMException && reason.name === "TimeoutError";
}

interface InFlight<J> {
  job: J;
  abort: AbortController;
  done: Promise<void>;
  givenBack: boolean;
}

const ERROR_PAUSE_MS = 1000;

// An abortable sleep: resolves early, never rejects, when `signal` aborts.
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return sleep(ms, undefined, { signal }).catch(() => {});
}

/**
 * The one sequential consumer of a queue.
 *
 * @example
 * const consumer = new Consumer({ queue: ingestion, ctx, lock, wake, pollIntervalMs: 5000, standbyRetryMs: 3000 });
 * consumer.start();
 * // … on SIGTERM:
 * await consumer.stop(performance.now() + 5000);
 */
export class Consumer<J extends ClaimedJob, C extends QueueContext> {
  readonly #o: ConsumerOptions<J, C>;
  readonly #log: Logger;
  readonly #stopping = new AbortController();
  #loop: Promise<void> | undefined;
  #inFlight: InFlight<J> | undefined;

  constructor(options: ConsumerOptions<J, C>) {
    this.#o = options;
    this.#log = options.ctx.log.child({ queue: options.queue.name });
  }

  /** Start the loop (lock → recover → claim/run); returns at once. */
  start(): void {
    this.#loop ??= this.#standBy();
  }

  /**
   * Stop claiming, abort the running job and give its claim back, release the lock.
   *
   * @param deadline `performance.now()` time (ms) by which this must return; a run still going
   *   then is given back anyway and left behind (its fenced commit will fail).
   */
  async stop(deadline: number): Promise<void> {
    this.#stopping.abort(new Error("Shutting down"));
    const current = this.#inFlight;
    // Keep part of the time for the give-back itself, so it lands inside the budget.
    const reserve = Math.min(1000, Math.max(50, (deadline - performance.now()) / 4));
    if (current && !(await settlesBy(current.done, deadline - reserve))) {
      this.#log.warn({ id: current.job.id }, "job ignored its abort signal; giving it back");
      await settlesBy(this.#giveBack(current), deadline);
    }
    if (this.#loop) await settlesBy(this.#loop, deadline);
    await settlesBy(this.#o.lock.release(), deadline);
  }

  async #standBy(): Promise<void> {
    const { lock } = this.#o;
    let saidStandingBy = false;
    while (!this.#stopping.signal.aborted) {
      let acquired = false;
      try {
        acquired = await lock.tryAcquire();
      } catch (err) {
        this.#log.warn({ err: String(err) }, "queue lock unavailable; retrying");
      }
      if (acquired) {
        this.#log.info("consumer started");
        saidStandingBy = false;
        await this.#serve(AbortSignal.any([this.#stopping.signal, lock.lost]));
        if (!this.#stopping.signal.aborted) this.#log.warn("consumer lost its lock; standing by");
        continue;
      }
      if (!saidStandingBy) {
        this.#log.info(
          { retryMs: this.#o.standbyRetryMs },
          "another consumer holds the queue; standing by",
        );
        saidStandingBy = true;
      }
      await pause(this.#o.standbyRetryMs, this.#stopping.signal);
    }
  }

  async #serve(active: AbortSignal): Promise<void> {
    const { queue, ctx, wake } = this.#o;
    const poll = setInterval(() => wake.notify(), this.#o.pollIntervalMs);
    wake.notify(); // the first round recovers and drains whatever is already queued
    try {
      while (await wake.wait(active)) {
        try {
          await queue.recover(ctx, active);
          const job = await queue.claim(ctx);
          if (job) {
            await this.#runOne(job, active);
            // The end of a job is a wake: the queue drains until a claim comes back empty, and a
            // NOTIFY that arrived meanwhile is already coalesced into this one.
            wake.notify();
          }
        } catch (err) {
          this.#log.error({ err }, "claim round failed; retrying");
          await pause(ERROR_PAUSE_MS, active);
          wake.notify();
        }
      }
    } finally {
      clearInterval(poll);
    }
  }

  async #runOne(job: J, active: AbortSignal): Promise<void> {
    const { queue, ctx } = this.#o;
    const abort = new AbortController();
    const forward = () => abort.abort(active.reason);
    active.addEventListener("abort", forward, { once: true });
    // A stop that landed while the claim was committing: the run starts aborted and gives back.
    if (active.aborted) forward();
    const timeout = new AbortController();
    const timer = setTimeout(
      () =>
        timeout.abort(new DOMException(`Run exceeded ${this.#o.runTimeoutMs} ms`, "TimeoutError")),
      this.#o.runTimeoutMs,
    );
    const signal = AbortSignal.any([abort.signal, timeout.signal]);
    this.#log.info({ id: job.id, attempt: job.attempt_count }, "job claimed");
    const current: InFlight<J> = { job, abort, done: Promise.resolve(), givenBack: false };
    current.done = (async () => {
      try {
        await queue.run(ctx, job, signal);
      } catch (err) {
        if (abort.signal.aborted) await this.#giveBack(current);
        else this.#log.error({ id: job.id, err }, "job run threw; it stays in flight until stale");
      }
    })();
    this.#inFlight = current;
    try {
      await current.done;
    } finally {
      clearTimeout(timer);
      active.removeEventListener("abort", forward);
      this.#inFlight = undefined;
    }
  }

  async #giveBack(current: InFlight<J>): Promise<void> {
    if (current.givenBack) return;
    current.givenBack = true;
    const { queue, ctx } = this.#o;
    try {
      if (await queue.giveBack(ctx, current.job)) {
        this.#log.info({ id: current.job.id }, "job given back");
      } else {
        this.#log.warn(
          { id: current.job.id },
          "give-back matched no row: the job already settled or its claim was lost",
        );
      }
    } catch (err) {
      this.#log.error({ id: current.job.id, err }, "give-back failed; the job stays in flight");
    }
  }
}
