/**
 * The sequential consumer that drives a {@linkcode Queue} (lib/queue.ts; ADR-022).
 *
 * One consumer per queue: it takes the queue's advisory lock (standing by while another process
 * holds it), recovers the queue's orphans (the lock proves their owner is gone), then loops: wait
 * for a wake → recover (before every claim, or only at lock acquisition and on the poll tick, as
 * the queue decides) → claim one job and run it → the end of the job wakes the loop again, so it
 * drains until a claim comes back empty, then arms a timer for the next due job and waits. A queue
 * may claim its next job in the transaction that settles the last one: the consumer
 * then runs that job straight away, one commit per job instead of two.
 *
 * An admin cancel of the running job ({@linkcode Consumer.cancel}) aborts its run as a shutdown
 * does; the stopped run is then settled by the queue's fenced `cancelRun` (`Failed`, cancelled by
 * admin) instead of given back. A paused queue ({@linkcode ConsumerOptions.paused}) is not claimed.
 *
 * Faults: a shutdown or a lost lock aborts the running job's signal and gives its claim
 * back, retrying a give-back the database refused until the shutdown deadline; a run that ignores
 * its abort is settled by a fenced write after a grace period and left behind; a failing round
 * backs off (capped), logs one line, and reopens the pool after a read-only error.
 * Jobs whose give-back never committed are reported by {@linkcode Consumer.stop} as an
 * {@linkcode InFlightError}, which the exit code tells. Running one job, and settling a run that
 * stopped, is lib/consumer_run.ts.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "./log.ts";
import { dbFault, faultDelayMs, sessionGone } from "./db_fault.ts";
import type { QueueLock } from "./lock.ts";
import { InFlightError, settlesBy } from "./lifecycle.ts";
import type { Wake } from "./wake.ts";
import {
  CancelRequest,
  type ClaimedJob,
  type ClaimNext,
  type Queue,
  type QueueContext,
} from "./queue.ts";
import { ConsumerRuns } from "./consumer_run.ts";

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
  /**
   * How long (ms) a run may ignore its abort (timeout or lost lock) before the consumer settles
   * it with a fenced write and moves on (default 5000).
   */
  abortGraceMs?: number;
  /** Cap (ms) of the backoff after a failing round (default 5000). */
  maxErrorDelayMs?: number;
  /** Reopen the pool's connections (after a read-only error, SQLSTATE 25006); never throws. */
  recycle?: () => Promise<void>;
  /**
   * Whether the queue is paused now (lib/control.ts): a paused consumer keeps its lock and its
   * recovery, finishes the job it runs, and claims nothing (no round's claim, no chained claim).
   * Wake it when the queue resumes.
   */
  paused?: () => boolean;
}

/**
 * Where a consumer stands, for `/readyz` and metrics:
 * - `starting`: not yet tried the lock;
 * - `holding`: holds the queue lock and consumes;
 * - `standing-by`: the lock is held by another session (a real holder: the database said so);
 * - `no-connection`: cannot get a connection for the lock (the error is in the log);
 * - `stopped`: stop() ran.
 */
export type ConsumerState = "starting" | "holding" | "standing-by" | "no-connection" | "stopped";

// An abortable sleep: resolves early, never rejects, when `signal` aborts.
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return sleep(ms, undefined, { signal }).catch(() => {});
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The one sequential consumer of a queue.
 *
 * @example
 * const consumer = new Consumer({ queue: ingestion, ctx, lock, wake, pollIntervalMs: 5000, standbyRetryMs: 3000, runTimeoutMs: 900_000 });
 * consumer.start();
 * // … on SIGTERM:
 * await consumer.stop(performance.now() + 5000); // throws InFlightError if a give-back never landed
 */
export class Consumer<J extends ClaimedJob, C extends QueueContext> {
  readonly #o: ConsumerOptions<J, C>;
  readonly #log: Logger;
  readonly #stopping = new AbortController();
  #loop: Promise<void> | undefined;
  /** The job in flight, and those whose give-back did not commit (in flight under this boot id). */
  readonly #runs: ConsumerRuns<J, C>;
  /**
   * A claim (a round's, or one chained into a run's completing statement) whose session died
   * before its reply came: it may have committed, leaving a job `Processing` under this boot id
   * that nothing runs. Cleared by a sweep of this boot's rows (`recoverOrphans` scope `"own"`).
   */
  #claimUnheard = false;
  #state: ConsumerState = "starting";
  #errors = 0;
  #roundFailures = 0;

  constructor(options: ConsumerOptions<J, C>) {
    this.#o = options;
    this.#log = options.ctx.log.child({ queue: options.queue.name });
    this.#runs = new ConsumerRuns(options, this.#log);
  }

  /** Where this consumer stands (see {@linkcode ConsumerState}). */
  get state(): ConsumerState {
    return this.#state;
  }

  /** Failed rounds (claim, recover, orphan recovery) since start, for metrics. */
  get roundFailures(): number {
    return this.#roundFailures;
  }

  /** Ids of jobs whose give-back has not committed yet (still in flight under this boot id). */
  get unsettled(): readonly string[] {
    return [...this.#runs.unsettled.keys()];
  }

  /**
   * Cancel job `id` if this consumer is running it: its run is aborted (with a
   * {@linkcode CancelRequest}, as a shutdown aborts it) and, once it has stopped, settled by the
   * queue's fenced `cancelRun`; a run that ignores the abort is settled so after the grace period.
   *
   * @returns whether `id` is the job running here (false: nothing changed).
   */
  cancel(id: string): boolean {
    const current = this.#runs.current;
    if (!current || current.job.id !== id || current.abort.signal.aborted) return false;
    this.#log.info({ id }, "job cancel requested; aborting its run");
    current.abort.abort(new CancelRequest(id));
    return true;
  }

  /** Start the loop (lock → recover orphans → recover/claim/run); returns at once. */
  start(): void {
    this.#loop ??= this.#standBy();
  }

  /**
   * Stop claiming, abort the running job and give its claim back, release the lock.
   *
   * @param deadline `performance.now()` time (ms) by which this must return; a run still going
   *   then is given back anyway and left behind (its fenced commit will fail). A give-back the
   *   database refuses is retried with backoff until the deadline.
   * @throws {InFlightError} naming the jobs whose give-back never committed.
   */
  async stop(deadline: number): Promise<void> {
    this.#runs.deadline = deadline;
    this.#stopping.abort(new Error("Shutting down"));
    const current = this.#runs.current;
    // Keep part of the time for the give-back itself, so it lands inside the budget.
    const reserve = Math.min(1000, Math.max(50, (deadline - performance.now()) / 4));
    if (current && !(await settlesBy(current.done, deadline - reserve))) {
      if (current.givenBack) {
        this.#log.warn({ id: current.job.id }, "give-back has not committed yet; waiting");
        await settlesBy(current.done, deadline);
      } else {
        this.#log.warn({ id: current.job.id }, "job ignored its abort signal; giving it back");
        await settlesBy(this.#runs.giveBack(current), deadline);
      }
    }
    if (this.#loop) await settlesBy(this.#loop, deadline);
    // Give-backs that failed earlier (a lost lock while the database was away): try again now.
    for (const left of [...this.#runs.unsettled.values()]) {
      left.givenBack = false;
      await settlesBy(this.#runs.giveBack(left), deadline);
    }
    // A claim whose reply was lost: give back what it may have claimed, while the lock is held.
    if (this.#claimUnheard) {
      const budget = AbortSignal.timeout(Math.max(1, deadline - performance.now()));
      await settlesBy(this.#sweepUnheard(budget), deadline);
    }
    await settlesBy(this.#o.lock.release(), deadline);
    this.#state = "stopped";
    // A give-back still waiting (a row lock, a silent socket) has not committed either.
    const waiting = this.#runs.current;
    if (waiting && !waiting.settled) this.#runs.unsettled.set(waiting.job.id, waiting);
    if (this.#claimUnheard) {
      this.#log.error(
        "a claim's reply was lost and this boot's rows could not be given back: its job, if the " +
          "claim committed, stays in flight until the next start recovers it",
      );
    }
    if (this.#runs.unsettled.size > 0 || this.#claimUnheard) {
      const ids = this.unsettled;
      if (ids.length > 0) {
        this.#log.error({ ids }, "jobs left in flight: their give-back did not commit");
      }
      throw new InFlightError(this.#o.queue.name, ids, this.#claimUnheard);
    }
  }

  async #standBy(): Promise<void> {
    const { lock } = this.#o;
    let failures = 0;
    while (!this.#stopping.signal.aborted) {
      let acquired = false;
      try {
        acquired = await lock.tryAcquire();
        failures = 0;
      } catch (err) {
        // Truthful: nobody may hold the lock; this process cannot even ask.
        if (failures++ === 0 || this.#state !== "no-connection") {
          this.#log.warn(
            { err: describe(err) },
            "cannot get a connection for the queue lock; retrying",
          );
        }
        this.#state = "no-connection";
        await pause(
          Math.max(this.#o.standbyRetryMs, faultDelayMs(failures)),
          this.#stopping.signal,
        );
        continue;
      }
      if (acquired) {
        const active = AbortSignal.any([this.#stopping.signal, lock.lost]);
        this.#state = "holding";
        this.#log.info("consumer started");
        if (await this.#recoverOrphans(active)) await this.#serve(active);
        if (!this.#stopping.signal.aborted) {
          this.#log.warn({ why: describe(lock.lost.reason) }, "consumer lost its lock; retrying");
          this.#state = "starting";
        }
        continue;
      }
      if (this.#state !== "standing-by") {
        this.#log.info(
          { retryMs: this.#o.standbyRetryMs },
          "another consumer holds the queue; standing by",
        );
      }
      this.#state = "standing-by";
      await pause(this.#o.standbyRetryMs, this.#stopping.signal);
    }
  }

  // The lock proves the rows' owner is gone: recover them now, before any claim; retried with
  // backoff while the database refuses (a restart, read-only). False when `active` aborted first.
  async #recoverOrphans(active: AbortSignal): Promise<boolean> {
    const { queue, ctx } = this.#o;
    for (let n = 1; !active.aborted; n++) {
      try {
        await queue.recoverOrphans(ctx, active);
        // This boot's own in-flight rows were given back by it.
        this.#runs.unsettled.clear();
        this.#claimUnheard = false;
        this.#errors = 0;
        return true;
      } catch (err) {
        await this.#backOff("orphan recovery failed; retrying", err, active);
      }
    }
    return false;
  }

  async #serve(active: AbortSignal): Promise<void> {
    const { queue, ctx, wake, lock } = this.#o;
    // The poll tick is a wake, and it brings the recovery of a queue that recovers on the tick;
    // the first round after taking the lock recovers too (`tick` starts true).
    let tick = true;
    const poll = setInterval(() => {
      tick = true;
      wake.notify();
    }, this.#o.pollIntervalMs);
    let due: ReturnType<typeof setTimeout> | undefined;
    // A job the last run claimed in its completing write: run it without a round.
    let chained: J | null = null;
    // Leave to chain: only for a queue that recovers on the tick (one that recovers before every
    // claim, as ADR-022 requires of SSG, must not skip that by chaining); never once the run is
    // aborted or the consumer stops; not while a tick waits (its recovery runs first, in a round
    // of its own).
    const recoversOnTick = queue.recoverOn === "poll";
    // Whether the last run was handed a chained claim's fence: its statement may have claimed.
    let chainSent = false;
    const claimNext = (signal: AbortSignal): ClaimNext => (sql) => {
      if (!recoversOnTick || signal.aborted || active.aborted || tick) return null;
      if (this.#o.paused?.()) return null;
      chainSent = true;
      return lock.claimFence(sql);
    };
    wake.notify(); // the first round recovers and drains whatever is already queued
    try {
      // A chained job is run even when stopping: it starts aborted and is given back.
      while (chained || await wake.wait(active)) {
        clearTimeout(due);
        let claiming = false;
        try {
          let job = chained;
          chained = null;
          if (!job) {
            if (this.#claimUnheard) await this.#sweepUnheard(active);
            if (tick || !recoversOnTick) await queue.recover(ctx, active);
            // Off the claim path: retention runs on the poll tick only.
            if (tick) await queue.prune?.(ctx, active);
            tick = false;
            // Paused: recovery runs on, nothing is claimed; a resume wakes the loop.
            if (!this.#o.paused?.()) {
              claiming = true;
              job = await queue.claim(ctx, lock.claimFence(ctx.sql));
              claiming = false;
            }
          }
          this.#errors = 0;
          let idle = !job;
          if (job) {
            chainSent = false;
            const next = await this.#runs.run(job, active, claimNext);
            // A run handed the fence that chained nothing (it failed, threw, was aborted): if its
            // completing statement was sent, its claim's reply may be what was lost.
            if (next === undefined && chainSent) this.#claimUnheard = true;
            if (next === undefined) {
              // The end of a job is a wake: the queue drains until a claim comes back empty, and a
              // NOTIFY that arrived meanwhile is already coalesced into this one.
              wake.notify();
            } else if (next) {
              chained = next;
            } else {
              idle = true; // the chained claim came back empty
            }
          }
          if (idle && queue.nextDueMs) {
            // Idle: wake for the next job waiting on its run_after, not at the next poll tick.
            const ms = await queue.nextDueMs(ctx);
            if (ms !== null && ms < this.#o.pollIntervalMs) {
              due = setTimeout(() => wake.notify(), Math.max(1, Math.ceil(ms)));
            }
          }
        } catch (err) {
          // The claim may have committed with its reply lost: sweep before the next claim.
          if (claiming && sessionGone(err)) this.#claimUnheard = true;
          await this.#backOff("claim round failed; retrying", err, active);
          wake.notify();
        }
      }
    } finally {
      clearInterval(poll);
      clearTimeout(due);
    }
  }

  // Give back this boot's rows after a claim whose reply was lost (see #claimUnheard). Throws the
  // database error (the round backs off and sweeps again before its next claim).
  async #sweepUnheard(signal: AbortSignal): Promise<void> {
    await this.#o.queue.recoverOrphans(this.#o.ctx, signal, "own");
    this.#claimUnheard = false;
    this.#log.info("claim reply was lost; this boot's rows given back");
  }

  // One line per failure (the stack at debug), a capped backoff, and a fresh pool after a
  // read-only error (lib/db_fault.ts DbFault.recycle says why not a connection error).
  async #backOff(msg: string, err: unknown, active: AbortSignal): Promise<void> {
    this.#roundFailures++;
    const delayMs = faultDelayMs(++this.#errors, this.#o.maxErrorDelayMs ?? 5000);
    const fault = dbFault(err);
    this.#log.warn({ err: describe(err), code: fault?.code, attempt: this.#errors, delayMs }, msg);
    this.#log.debug({ err }, "round failure detail");
    if (fault?.recycle && this.#o.recycle) await this.#o.recycle();
    await pause(delayMs, active);
  }
}
