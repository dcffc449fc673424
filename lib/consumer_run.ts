/**
 * The job a consumer runs, from its claim to its settle (lib/consumer.ts `Consumer` drives the
 * loop around it). A run gets the consumer's signal and the run timeout; a run that ignores its
 * abort is settled after a grace period by a fenced write and left behind. A stopped run is
 * settled by the queue: an admin cancel by its fenced `cancelRun` (`Failed`, cancelled by admin),
 * anything else by its give-back, retried (each try bounded) until the shutdown deadline; a stuck
 * run by its `abandon`. Jobs whose give-back never committed are kept in
 * {@linkcode ConsumerRuns.unsettled}, for the consumer's stop to report.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "./log.ts";
import { dbFault, faultDelayMs } from "./db_fault.ts";
import type { ConsumerOptions } from "./consumer.ts";
import { type ClaimedJob, type ClaimNext, isCancel, type QueueContext } from "./queue.ts";

/** A job in flight: its run, its abort, and how far its settle got. */
export interface InFlight<J> {
  job: J;
  abort: AbortController;
  done: Promise<void>;
  givenBack: boolean;
  /** The run finished, or a give-back/abandon wrote (or matched nothing): nothing left to do. */
  settled: boolean;
  /** What the run returned: the job it chained (null: none left), or undefined (no chain). */
  next?: J | null;
}

/** How long (ms) one give-back try may wait for an answer before another try is sent. */
const GIVE_BACK_TRY_MS = 1000;

// `promise`, or a rejection with a connection-class error once `ms` pass (the promise runs on).
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`No answer within ${ms} ms`), { code: "08006" })),
      ms,
    );
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// What running and settling a job reads of the consumer's options.
type RunOptions<J extends ClaimedJob, C extends QueueContext> = Pick<
  ConsumerOptions<J, C>,
  "queue" | "ctx" | "runTimeoutMs" | "abortGraceMs" | "recycle"
>;

/** The consumer's runs: the job in flight, and the jobs whose give-back has not committed. */
export class ConsumerRuns<J extends ClaimedJob, C extends QueueContext> {
  readonly #o: RunOptions<J, C>;
  readonly #log: Logger;
  #inFlight: InFlight<J> | undefined;
  /** Jobs whose give-back did not commit: in flight under this boot id. */
  readonly unsettled = new Map<string, InFlight<J>>();
  /**
   * The shutdown's `performance.now()` time (ms) by which a give-back must land; unset outside a
   * shutdown (then a give-back gets 5 s).
   */
  deadline: number | undefined;

  /**
   * @param options the consumer's queue, context, run timeout, abort grace and pool recycle.
   * @param log the consumer's log.
   */
  constructor(options: RunOptions<J, C>, log: Logger) {
    this.#o = options;
    this.#log = log;
  }

  /** The job running now, if any. */
  get current(): InFlight<J> | undefined {
    return this.#inFlight;
  }

  /**
   * Run one claimed job, with the consumer's signal and the run timeout, giving a run that ignores
   * its abort the grace period before settling it.
   *
   * @param job the claimed job.
   * @param active the consumer's signal (its stop, its lost lock): aborting it aborts the run.
   * @param claimNext makes the fence a run may claim its next job with, for the run's signal.
   * @returns the job its run chained (null: none left), or undefined when it did not chain, was
   *   aborted, or was settled here.
   */
  async run(
    job: J,
    active: AbortSignal,
    claimNext: (signal: AbortSignal) => ClaimNext,
  ): Promise<J | null | undefined> {
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
    const current: InFlight<J> = {
      job,
      abort,
      done: Promise.resolve(),
      givenBack: false,
      settled: false,
    };
    current.done = (async () => {
      try {
        const next = await queue.run(ctx, job, signal, claimNext(signal));
        if (next !== undefined) current.next = next;
        current.settled = true;
      } catch (err) {
        if (abort.signal.aborted && isCancel(abort.signal.reason)) await this.#cancelRun(current);
        else if (abort.signal.aborted) await this.giveBack(current);
        else this.#log.error({ id: job.id, err }, "job run threw; it stays in flight until stale");
      }
    })();
    this.#inFlight = current;
    // A run that ignores its abort (timeout, lost lock) must not hold the sequential queue: after
    // the grace period it is settled by a fenced write and left behind.
    const grace = this.#o.abortGraceMs ?? 5000;
    let graceTimer: ReturnType<typeof setTimeout> | undefined;
    const ignored = new Promise<"ignored">((resolve) => {
      const arm = () => (graceTimer = setTimeout(() => resolve("ignored"), grace));
      if (signal.aborted) arm();
      else signal.addEventListener("abort", arm, { once: true });
    });
    try {
      const ended = await Promise.race([current.done, ignored]);
      if (ended === "ignored" && current.givenBack) {
        // The run did stop: its give-back is what takes long (the database is away). It is
        // bounded by the shutdown budget; wait for it rather than call the run stuck.
        await current.done;
      } else if (ended === "ignored") {
        this.#log.error(
          { id: job.id, graceMs: grace },
          "job ignored its abort signal; settling it",
        );
        if (abort.signal.aborted && isCancel(abort.signal.reason)) await this.#cancelRun(current);
        else if (abort.signal.aborted || !queue.abandon) await this.giveBack(current);
        else await this.#abandon(current, describe(signal.reason));
        return undefined;
      }
      return current.next;
    } finally {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      active.removeEventListener("abort", forward);
      this.#inFlight = undefined;
    }
  }

  // Settle a cancelled run with the queue's fenced write (Failed, cancelled by admin). A queue
  // without `cancelRun`, or a write the database refuses, gives the claim back instead: the job
  // is then runnable again, never left in flight.
  async #cancelRun(current: InFlight<J>): Promise<void> {
    const { queue, ctx } = this.#o;
    if (current.givenBack) return;
    if (!queue.cancelRun) return await this.giveBack(current);
    current.givenBack = true; // the run's own late give-back must not follow
    try {
      const wrote = await queue.cancelRun(ctx, current.job);
      current.settled = true; // written, or the fence says the claim was already lost
      if (wrote) this.#log.info({ id: current.job.id }, "job cancelled by admin");
      else {
        this.#log.warn(
          { id: current.job.id },
          "cancel matched no row: the job already settled or its claim was lost",
        );
      }
    } catch (err) {
      this.#log.error(
        { id: current.job.id, err: describe(err) },
        "cancel could not be written; giving the job back",
      );
      current.givenBack = false;
      await this.giveBack(current);
    }
  }

  async #abandon(current: InFlight<J>, reason: string): Promise<void> {
    current.givenBack = true; // the run's own late give-back must not follow
    const { queue, ctx } = this.#o;
    try {
      const wrote = await queue.abandon!(ctx, current.job, `${reason}; the run ignored its abort`);
      current.settled = true; // written, or the fence says the claim was already lost
      this.#log.warn({ id: current.job.id, wrote }, "stuck job abandoned");
    } catch (err) {
      this.#log.error(
        { id: current.job.id, err: describe(err) },
        "abandon failed; the job stays in flight until stale",
      );
    }
  }

  /**
   * Give the claim back; a database that refuses is retried with backoff until the shutdown
   * {@linkcode ConsumerRuns.deadline}. Outside a shutdown (lost lock) the budget is 5 s: the next
   * lock acquisition gives this boot's rows back anyway. Never throws: a give-back that never
   * commits leaves its job in {@linkcode ConsumerRuns.unsettled}.
   *
   * Each try waits at most GIVE_BACK_TRY_MS: a query queued behind a connection the server
   * silently dropped (a proxy that accepts and closes) never answers on its own, and must not eat
   * the whole budget. A try that did not answer is kept, not cancelled: it runs once the database
   * is back, and whichever try answers first settles the give-back (the write is fenced, so a
   * later one matches no row and changes nothing).
   */
  async giveBack(current: InFlight<J>): Promise<void> {
    if (current.givenBack) return;
    current.givenBack = true;
    const { queue, ctx } = this.#o;
    const id = current.job.id;
    const deadline = this.deadline ?? performance.now() + 5000;
    type Outcome = { wrote: boolean } | { err: unknown };
    const waiting = new Set<Promise<Outcome>>();
    let faults = 0;
    for (let n = 1;; n++) {
      const attempt: Promise<Outcome> = queue.giveBack(ctx, current.job).then(
        (wrote) => ({ wrote }),
        (err) => ({ err }),
      );
      waiting.add(attempt);
      attempt.then(() => waiting.delete(attempt));
      const left = Math.max(50, deadline - performance.now());
      const outcome = await withDeadline(
        Promise.race(waiting),
        Math.min(left, GIVE_BACK_TRY_MS),
      ).catch((err: unknown) => ({ err, unanswered: true }));
      if ("wrote" in outcome) {
        if (outcome.wrote) this.#log.info({ id, attempt: n }, "job given back");
        else {
          this.#log.warn(
            { id },
            "give-back matched no row: the job already settled or its claim was lost",
          );
        }
        this.unsettled.delete(id);
        current.settled = true;
        return;
      }
      this.unsettled.set(id, current);
      const delayMs = "unanswered" in outcome ? 0 : faultDelayMs(++faults, 1000);
      const remaining = deadline - performance.now() - 50;
      if (!dbFault(outcome.err) || remaining < Math.max(delayMs, 50)) {
        this.#log.error(
          { id, err: describe(outcome.err), attempt: n },
          "give-back failed; the job stays in flight",
        );
        return;
      }
      this.#log.warn(
        { id, err: describe(outcome.err), attempt: n, delayMs },
        "give-back failed; retrying",
      );
      if (dbFault(outcome.err)?.recycle && this.#o.recycle && delayMs > 0) await this.#o.recycle();
      if (delayMs > 0) await sleep(Math.min(delayMs, remaining));
    }
  }
}
