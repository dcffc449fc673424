/**
 * The queue contract (ADR-022): what a queue module exports for the sequential consumer
 * (lib/consumer.ts) to drive, what its verbs receive, and the fenced settle every consumed queue's
 * run ends with. A queue imports its types from here, never the consumer's loop.
 *
 * @module
 */
import type { QueueDefaults } from "./config.ts";
import type { Logger } from "./log.ts";
import { type Fragment, type Sql, transaction, type TxSql } from "./db.ts";
import { retryFaults } from "./db_fault.ts";
import type { JobEvent, JobEvents } from "./events.ts";

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

/**
 * The consumer's leave, passed to {@linkcode Queue.run}, to claim the next job inside the
 * statement or transaction that completes this one.
 *
 * @param sql the client the claim runs on (the pool, or the completing transaction).
 * @returns the queue lock's claim fence to AND into the claim's WHERE (lib/lock.ts), or null:
 *   claim nothing now (the run was aborted, the consumer is stopping, or a poll tick is due and
 *   the next claim must wait for the recovery it brings).
 */
export type ClaimNext = (sql: Sql | TxSql) => Fragment | null;

/**
 * Which rows {@linkcode Queue.recoverOrphans} recovers: `"all"` at lock acquisition (every row in
 * flight is orphaned); `"own"` only this boot id's rows, given back — the sweep after a claim whose
 * reply was lost, run while the lock is held, when another boot's row may be a standby's live
 * claim (a lock lost but not yet noticed) and must not be touched.
 */
export type OrphanScope = "all" | "own";

/**
 * Settle a claimed job: the queue's fenced write, in a transaction of its own, and its event only
 * once it has committed (docs/development.md). A fence that matches no row means the claim was lost: that
 * is logged, nothing changes, and the answer is false. A database fault is tried again
 * (lib/db_fault.ts `retryFaults`; the fence makes a repeat harmless).
 *
 * @param write runs the fenced UPDATE (and what must commit with it) and returns how many rows
 *   the fence matched.
 * @returns true when the fence matched and the transaction committed.
 * @throws the last database fault, or any other error at once.
 * @example
 * await settleClaim(ctx, "ingestion", job.id, { transition: "failed", status: "Failed", … },
 *   async (sql) => (await sql`update ingestion_jobs set … where id = ${job.id} and …`).count);
 */
export async function settleClaim(
  ctx: QueueContext,
  queue: string,
  id: string,
  event: Pick<JobEvent, "transition" | "status" | "attempt" | "error">,
  write: (sql: TxSql) => Promise<number>,
): Promise<boolean> {
  return await retryFaults(
    () =>
      transaction(ctx.sql, ctx.log, async (tx) => {
        if ((await write(tx.sql)) === 0) {
          ctx.log.warn(
            { queue, id, transition: event.transition },
            "settling write matched no row: the claim was lost",
          );
          return false;
        }
        tx.afterCommit(() => ctx.events.publish({ queue, id, ...event }));
        return true;
      }),
    ctx.log,
  );
}

/** When a queue's {@linkcode Queue.recover} runs (docs/development.md: the queue decides). */
export type RecoverOn = "claim" | "poll";

/** The least a claimed job carries: its id and the attempt count its claim wrote. */
export interface ClaimedJob {
  /** bigint id, as a string. */
  readonly id: string;
  readonly attempt_count: number;
}

/**
 * One queue: a module in `queues/` exporting these members (docs/development.md).
 *
 * - `recoverOrphans` runs once each time the consumer acquires the queue's lock (first start,
 *   takeover after a SIGKILL, re-acquiring after a database restart), before the first claim.
 *   Holding the lock proves every row still in flight is orphaned: rows claimed by
 *   another boot id follow the queue's crash rule at once (no stale wait); rows claimed by this
 *   boot id were cut off by the lock loss, not a crash, and are given back (attempt not counted).
 *   With scope `"own"` it gives back this boot id's rows and touches no other: the consumer runs it
 *   so after a claim whose reply was lost (the session died after the claim could have committed,
 *   so its job may be `Processing` under this boot id with no run), before its next claim and at
 *   stop; without it that job waited for the stale rule (10 min) or the next start.
 * - `recover` is the queue's rule for stale rows, and any repair of work whose effects did not
 *   finish. When it runs is the queue's `recoverOn`: `"claim"` (the default) before every claim,
 *   as ADR-022 requires of SSG (any `Running` row seen between jobs is dead); `"poll"` once after
 *   each lock acquisition and then on every poll tick, so its cost is paid per tick, not per job
 *   (ingestion). It should return promptly once `signal` aborts.
 * - `claim` atomically takes the next job (one statement, SKIP LOCKED) or returns null. It ANDs
 *   `lockHeld` into its WHERE, so a claim without the queue lock takes nothing.
 * - `run` does the work and settles the job with fenced writes. Once `signal` aborts for shutdown
 *   or a lost lock it must reject with the signal's reason without settling anything; when the
 *   reason is a run timeout ({@linkcode isRunTimeout}) it settles the job as the queue sees fit.
 *   It may claim the next job in its completing write with `claimNext` (only when its fenced
 *   completion matched, and only with the fence `claimNext` gives; null means claim nothing) and
 *   return it, or null when that claim found nothing; it returns nothing when it did not chain,
 *   and the consumer then claims in a round of its own. A chained job counts its attempt in the
 *   same commit as the completion before it: see the README ("Cost per job") for what that means
 *   when the database crashes between the two.
 * - `prune` (optional) deletes finished jobs past the queue's retention, in small batches; the
 *   consumer calls it on the poll tick only, never on the claim path.
 * - `giveBack` returns an aborted job to its queue with a fenced write; false when the claim was
 *   already lost (0 rows), which is logged and never "fixed". It throws the database error.
 * - `cancelRun` (optional) settles, with a fenced write, a run an admin cancelled once it has
 *   stopped: `Failed` with {@linkcode CANCELLED} (the consumer aborts the run with a
 *   {@linkcode CancelRequest}; the run rejects with it as on shutdown). False when the fence
 *   matched no row. Without it a cancelled run is given back.
 * - `abandon` (optional) settles, with a fenced write, a run that ignored its timeout for the
 *   grace period: the queue's crash rule (the attempt spent). Without it such a job is given back.
 * - `nextDueMs` (optional) says when the next job becomes due, so an idle consumer wakes for it
 *   instead of waiting for the poll.
 */
export interface Queue<J extends ClaimedJob, C extends QueueContext> {
  /** Short name for logs and events, e.g. `ingestion`. */
  readonly name: string;
  /** The table; its NOTIFY channel is `<schema>.<table>`. */
  readonly table: string;
  /** Its settings' env prefix and defaults, read by `parseQueueSettings` (lib/config.ts). */
  readonly defaults: QueueDefaults<number | null>;
  recoverOrphans(ctx: C, signal: AbortSignal, scope?: OrphanScope): Promise<void>;
  /** When `recover` runs; `"claim"` when absent. */
  readonly recoverOn?: RecoverOn;
  recover(ctx: C, signal: AbortSignal): Promise<void>;
  claim(ctx: C, lockHeld?: Fragment): Promise<J | null>;
  /**
   * @returns the next job when it chained a claim (null: the chained claim found nothing);
   *   nothing when it did not chain.
   */
  run(ctx: C, job: J, signal: AbortSignal, claimNext?: ClaimNext): Promise<J | null | void>;
  giveBack(ctx: C, job: J): Promise<boolean>;
  abandon?(ctx: C, job: J, reason: string): Promise<boolean>;
  cancelRun?(ctx: C, job: J): Promise<boolean>;
  prune?(ctx: C, signal: AbortSignal): Promise<void>;
  /**
   * @returns ms from now (database clock) until the earliest job that is waiting for a future
   *   time becomes due; null when none is.
   */
  nextDueMs?(ctx: C): Promise<number | null>;
}

/** Whether an abort reason is a run timeout (as opposed to shutdown or a lost lock). */
export function isRunTimeout(reason: unknown): boolean {
  return reason instanceof DOMException && reason.name === "TimeoutError";
}

/**
 * The error an admin cancel writes on the job it ends `Failed` (a `Queued` job at once, a running
 * one once its run has stopped), so ADR-022's "Failed is terminal until an admin retry" holds and
 * a retry brings it back. The attempt history records it as outcome `cancelled`
 * (sql/012_operations.sql).
 */
export const CANCELLED = "cancelled by admin";

/** The abort reason of a run an admin cancelled (lib/consumer.ts `Consumer.cancel`). */
export class CancelRequest extends Error {
  override name = "CancelRequest";
  constructor(id: string) {
    super(`Job ${id} ${CANCELLED}`);
  }
}

/** Whether an abort reason is an admin cancel (as opposed to shutdown, a lost lock, a timeout). */
export function isCancel(reason: unknown): boolean {
  return reason instanceof CancelRequest;
}

/**
 * What an admin cancel did (each queue's `cancel`):
 * - `cancelled`: the job is `Failed` with {@linkcode CANCELLED} now (it was runnable, or its run
 *   stopped and was settled so);
 * - `requested`: its run was asked to stop and has not settled yet (the consumer settles it);
 * - `running_host`: a host-polled job is running: its step may already have acted (409);
 * - `finished`: it is `Completed` or `Failed` (also when its run finished before the cancel);
 * - `absent`: no such job.
 */
export type CancelOutcome<R> =
  | { readonly outcome: "cancelled" | "requested" | "running_host" | "finished"; readonly job: R }
  | { readonly outcome: "absent" };

/** Most jobs one bulk retry re-queues (the rest stay `Failed`, and the answer says how many). */
export const BULK_RETRY_MAX = 10_000;

/** What a bulk retry of the jobs matching a filter did (each queue's `bulkRetry`). */
export interface BulkRetryOutcome {
  /** Failed jobs matching the filter, counted up to {@linkcode BULK_RETRY_MAX} + 1. */
  readonly matched: number;
  /** Jobs re-queued (0 for a dry run). */
  readonly retried: number;
  /** Matching jobs the queue's retry rule left `Failed` (e.g. SSG's one queued rebuild). */
  readonly skipped: number;
  /** More jobs matched than {@linkcode BULK_RETRY_MAX}: run it again for the rest. */
  readonly truncated: boolean;
  /** Ids re-queued. */
  readonly ids: readonly string[];
}

/** Which jobs a list or a bulk retry takes: a status, words of the job's subject. */
export interface JobFilter {
  /** Only jobs in this status (one of the queue's). */
  readonly status?: string;
  /** Only jobs whose subject (file, edition id or title, book title) contains this, any case. */
  readonly q?: string;
}

/** A page of a queue's jobs, newest first, keyset-paged on the id. */
export interface JobListPage extends JobFilter {
  /** Only jobs with a smaller id than this (the last id of the previous page). */
  readonly beforeId?: string;
  /** Most jobs to return (≥ 1). */
  readonly limit: number;
}

/**
 * A `LIKE` pattern matching `q` anywhere, its `%`, `_` and `\` taken literally.
 *
 * @example
 * sql`and source_path ilike ${containing(q)}`
 */
export function containing(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The outcome of a bulk retry statement that counted `matched` and re-queued `ids`. */
export function bulkOutcome(matched: number, ids: string[], dryRun: boolean): BulkRetryOutcome {
  const eligible = Math.min(matched, BULK_RETRY_MAX);
  return {
    matched,
    retried: ids.length,
    skipped: dryRun ? 0 : eligible - ids.length,
    truncated: matched > BULK_RETRY_MAX,
    ids,
  };
}
