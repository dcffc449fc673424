/**
 * The ingestion queue: table `ingestion_jobs` (sql/001_ingestion.sql), consumed by this process's
 * one ingestion consumer (lib/consumer.ts), fed by `POST /internal/ingestion/jobs`.
 *
 * Transitions (ADR-022, queue 1):
 * - Queued → Processing: {@linkcode claim} (counts the attempt, stamps `claimed_by`).
 * - Processing → Completed: {@linkcode run}, in the transaction that saves the edition.
 * - Processing → Failed: {@linkcode run} for a file that cannot be read (at once, no retry), or a
 *   transient fault at the attempts cap.
 * - Processing → Queued: {@linkcode run} for a transient fault under the cap (after a delay);
 *   {@linkcode giveBack} on shutdown (attempt not counted, no error text).
 * - Failed → Queued: {@linkcode retry}, the admin retry (attempts reset, error cleared);
 *   {@linkcode bulkRetry} for every `Failed` job matching a filter, in one statement.
 * - Queued → Failed: {@linkcode cancel}, the admin cancel (error `cancelled by admin`).
 * - Processing → Failed: {@linkcode cancelRun}, once an admin cancel has stopped the run (fenced).
 *
 * - Processing → Queued | Failed: {@linkcode recoverOrphans}, once per lock acquisition: a row of
 *   another boot id is re-queued with its attempt spent (Failed at the cap); a row of this boot id
 *   (cut off by a lost lock) is given back.
 *
 * - Completed | Failed → deleted: {@linkcode prune}, once finished longer ago than
 *   `INGESTION_RETENTION_DAYS` (unset: kept forever), a small batch at a time on the poll tick.
 *
 * Crash rule: holding the queue lock proves a `Processing` row's consumer is gone, so
 * {@linkcode recoverOrphans} recovers every such row when the consumer takes the lock — after a
 * SIGKILL the successor re-picks the job at once, not after the stale threshold.
 * Stale rule, the fallback: a `Processing` row claimed more than `staleAfterMs` ago (default
 * 10 min) is taken again by the claim while `attempt_count` < {@linkcode MAX_ATTEMPTS}, and
 * {@linkcode recover} fails it at the cap. With the lock held nobody re-picks a running job, so a
 * run may outlive `staleAfterMs`; the run timeout, not the stale rule, bounds one run.
 *
 * When recovery runs ({@linkcode recoverOn}): at lock acquisition and on the poll tick, not before
 * every claim. The lock holder is the only consumer, its orphans are recovered when it
 * takes the lock, and what `recover` still finds — a stale row at the cap, an asset write cut short
 * — can wait for the tick; paying for it before each claim cost two statements per job. ADR-022's
 * "before every claim" is SSG's rule (and SEO's), which keep it.
 *
 * Cost per job: one statement saves the edition and its chapters, completes the job,
 * creates its auto-publish job and claims the next job ({@linkcode run} with `claimNext`); with no
 * resources to store it is a transaction of its own, so a drain of such books costs that statement
 * and the asset mark after the files are written: two round trips, two commits per job. A book with
 * resources (images) adds BEGIN, one insert per 8 MB of them, and COMMIT.
 *
 * @module
 */
import type { QueueDefaults } from "../../lib/config.ts";
import type { Fragment, Sql, TxSql } from "../../lib/db.ts";
import type { JobEvent } from "../../lib/events.ts";
import {
  CANCELLED,
  type ClaimedJob,
  type ClaimNext,
  type QueueContext,
  type RecoverOn,
  settleClaim,
} from "../../lib/queue.ts";
import { isDataException, publishClaimed, retryUnderCap, runFault } from "../../lib/queue_flow.ts";
import { extractBook, type ExtractedBook, UnreadableBookError } from "../../books/extract.ts";
import { complete, type EditionSavedHook } from "./_catalog.ts";
import { resolveSourceFile } from "../../books/source_path.ts";
import { jobError } from "../../lib/job_error.ts";
import { MAX_ATTEMPTS, name } from "./_constants.ts";

export { MAX_ATTEMPTS, name } from "./_constants.ts";
export { ClaimLostError } from "../../lib/queue_flow.ts";
export type { EditionSavedHook } from "./_catalog.ts";
export { nextDueMs, recover, recoverOrphans } from "./_recovery.ts";
export { prune, PRUNE_BATCH, PRUNE_BUDGET_MS } from "./_retention.ts";

/** The queue table; NOTIFY channel `<schema>.ingestion_jobs`. */
export const table = "ingestion_jobs";
/**
 * Settings: `INGESTION_STALE_AFTER_MS` (default 10 min, ADR-022 row 1) and `INGESTION_TIMEOUT_MS`
 * (default 15 min; with the queue lock held nothing else re-picks a long run, so the run timeout,
 * not the stale rule, bounds one run while this process lives).
 */
export const defaults: QueueDefaults = {
  envPrefix: "INGESTION",
  staleAfterMs: 600_000,
  timeoutMs: 900_000,
  retentionDays: null,
};
/** {@linkcode recover} runs at lock acquisition and on the poll tick (see the module comment). */
export const recoverOn: RecoverOn = "poll";
/** Delay before a transient failure is retried, in ms, per attempt already made. */
export const RETRY_DELAY_MS = 5000;

/** Statuses of `ingestion_jobs.status`. */
export type IngestionStatus = "Queued" | "Processing" | "Completed" | "Failed";

/** What this queue's verbs need beyond {@linkcode QueueContext}. */
export interface IngestionContext extends QueueContext {
  /** Root directory of source files and chapter assets. */
  readonly storageDir: string;
  /** A Processing row claimed longer ago than this (ms) is stale. */
  readonly staleAfterMs: number;
  /** Days a finished job is kept before {@linkcode prune} deletes it; null or absent: forever. */
  readonly retentionDays?: number | null;
  /**
   * Reads a book file; `extractBook` when unset. A test sets an extractor that returns a
   * truncated result on cancel instead of throwing, the case ADR-022 says must never be saved.
   */
  readonly extract?: (path: string, signal: AbortSignal) => Promise<ExtractedBook>;
  /** A part another queue adds to the completing statement (auto-publish). */
  readonly onEditionSaved?: EditionSavedHook;
}

/** A claimed ingestion job, as the claim wrote it (the fence for every later write). */
export interface IngestionJob extends ClaimedJob {
  readonly source_path: string;
  readonly edition_id: string | null;
  readonly claimed_by: string;
  /** Seconds it was runnable before this claim (database clock); null for a stale re-pick. */
  readonly runnable_for_s: number | null;
}

/** A job row as the API shows it. */
export interface IngestionJobRow {
  id: string;
  source_path: string;
  edition_id: string | null;
  status: IngestionStatus;
  attempt_count: number;
  error: string | null;
  claimed_by: string | null;
  claimed_at: Date | null;
  run_after: Date;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  /** Every attempt that ended, oldest first (the last 20; sql/012_operations.sql). */
  attempts: AttemptRecord[];
}

/** One ended attempt, as the settling write's trigger recorded it (sql/012_operations.sql). */
export interface AttemptRecord {
  attempt: number;
  started_at: string | null;
  ended_at: string;
  outcome: "completed" | "failed" | "cancelled" | "given_back" | "retry";
  error: string | null;
}

/** A job as the list route shows it: the row and its subject (the source path). */
export interface IngestionListRow extends IngestionJobRow {
  subject: string;
}

/**
 * Claim the oldest runnable job: `Queued` and due, or `Processing` but stale and under the cap.
 * One statement, so the claim and the counted attempt commit together.
 *
 * @param lockHeld the queue lock's claim fence (lib/lock.ts): without the lock, nothing is claimed.
 *   Omitted only by tests that call the verb directly.
 * @returns the claimed job, or null when nothing is runnable.
 */
export async function claim(
  ctx: IngestionContext,
  lockHeld?: Fragment,
): Promise<IngestionJob | null> {
  const [job] = await ctx.sql<IngestionJob[]>`${
    claimStatement(ctx, ctx.sql, lockHeld ?? ctx.sql`true`)
  }`;
  if (!job) return null;
  publishClaimed(ctx, name, "Processing", job, job.runnable_for_s);
  return job;
}

// The claim, as a statement of its own ({@linkcode claim}) or as the last part of the completing
// statement ({@linkcode run}, chained). The scalar `id = (select … for update skip locked limit 1)`
// takes exactly one row: `id in (select …)` may be re-run per row by the planner and claim several
// (docs/development.md). `where` holds the lock's fence, and what else a chained claim requires.
function claimStatement(ctx: IngestionContext, sql: Sql | TxSql, where: Fragment): Fragment {
  return sql`
    update ingestion_jobs
    set status = 'Processing', attempt_count = attempt_count + 1, claimed_by = ${ctx.bootId},
        claimed_at = now(), updated_at = now()
    where id = (
      select id from ingestion_jobs
      where ${where}
        and ((status = 'Queued' and run_after <= now())
          or (status = 'Processing'
              and claimed_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
              and attempt_count < ${MAX_ATTEMPTS}))
      order by id
      for update skip locked
      limit 1
    )
    returning id, source_path, edition_id, attempt_count, claimed_by, (
      -- The wake latency: a subquery in RETURNING reads the statement's snapshot, so it sees the
      -- row as it was before this claim. Runnable since its last write (insert, give-back,
      -- retry) or its run_after, whichever is later; null for a stale re-pick (no wake was for it).
      select extract(epoch from now() - greatest(o.run_after, o.updated_at))::float8
      from ingestion_jobs o where o.id = ingestion_jobs.id and o.status = 'Queued'
    ) as runnable_for_s`;
}

/**
 * Give a claimed job back on shutdown: `Queued`, the attempt un-counted, no error text. One
 * set-based UPDATE fenced on the row as this run claimed it, so a claim that was lost (or never
 * committed) is never un-counted (ADR-022, "shipped 2026-10-07").
 *
 * @returns false when the fence matched no row.
 */
export async function giveBack(ctx: IngestionContext, job: IngestionJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) =>
      sql`status = 'Queued', attempt_count = attempt_count - 1, error = null, claimed_at = null`,
    { transition: "given_back", status: "Queued", attempt: job.attempt_count - 1 },
  );
}

/**
 * Settle a run that ignored its abort (a timeout) for the grace period: the crash rule, fenced on
 * the claim — `Queued` with the attempt spent under the cap, else `Failed`.
 *
 * @param reason why, for the job's `error`.
 * @returns false when the fence matched no row.
 */
export async function abandon(
  ctx: IngestionContext,
  job: IngestionJob,
  reason: string,
): Promise<boolean> {
  return await retryUnderCap(job, MAX_ATTEMPTS, reason, {
    fail: (error) =>
      settle(
        ctx,
        job,
        (sql) => sql`status = 'Failed', error = ${error}, finished_at = now()`,
        { transition: "failed", status: "Failed", attempt: job.attempt_count, error },
      ),
    retry: (error) =>
      settle(
        ctx,
        job,
        (sql) => sql`status = 'Queued', error = ${error}, claimed_at = null, run_after = now()`,
        { transition: "failed", status: "Queued", attempt: job.attempt_count, error },
      ),
  });
}

/**
 * Settle a run an admin cancelled, once it has stopped: `Failed` with {@linkcode CANCELLED}, the
 * attempt spent. Fenced on the claim, as every settle.
 *
 * @returns false when the fence matched no row (the run already settled, or the claim was lost).
 */
export async function cancelRun(ctx: IngestionContext, job: IngestionJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) => sql`status = 'Failed', error = ${CANCELLED}, finished_at = now()`,
    { transition: "cancelled", status: "Failed", attempt: job.attempt_count, error: CANCELLED },
  );
}

/**
 * Ingest the job's source file: extract, then save the edition, its chapters and `Completed` in
 * one fenced transaction; after it commits, write the chapter assets and delete the previous
 * version's. An unreadable file is `Failed` at once; any other fault is retried under the cap.
 *
 * With `claimNext` (the consumer's leave) the statement that completes the job also
 * claims the next one, so the drain pays one commit per job, not two: the next job's attempt is
 * counted in the same commit as this job's completion. If the database crashes before that commit,
 * both roll back (this job stays `Processing` and is given back when the lock is taken again,
 * attempt not counted, as before); if it crashes after, both stand — this job `Completed`, the next
 * one `Processing` under this boot id — and the next lock acquisition gives the next one back,
 * attempt not counted, exactly as it does a claim whose reply was lost (README "Cost per job").
 *
 * @param signal aborted on shutdown or a lost lock: the run then rejects with its reason and
 *   saves nothing (the consumer gives the claim back).
 * @param claimNext see above; absent (tests) or answering null: nothing is chained.
 * @returns the job the completing statement claimed, or null when it found none; nothing when it
 *   did not chain (no leave, or the job did not complete).
 * @throws the signal's reason when aborted; {@linkcode ClaimLostError} never escapes (logged).
 */
export async function run(
  ctx: IngestionContext,
  job: IngestionJob,
  signal: AbortSignal,
  claimNext?: ClaimNext,
): Promise<IngestionJob | null | void> {
  try {
    const book = await (ctx.extract ?? extractBook)(
      await resolveSourceFile(ctx.storageDir, job.source_path),
      signal,
    );
    // An extractor may return a truncated result on cancel instead of throwing (ADR-022, the PDF
    // extractor): never save what a cancelled run produced.
    signal.throwIfAborted();
    return await complete(
      ctx,
      job,
      book,
      signal,
      claimNext,
      (sql, where) => claimStatement(ctx, sql, where),
    );
  } catch (err) {
    const fault = runFault(ctx, name, job.id, err, signal);
    if (fault === "lost") return;
    if (fault === "timeout") return await retryLater(ctx, job, signal.reason);
    if (err instanceof UnreadableBookError || err instanceof RangeError) {
      return await fail(ctx, job, err.message);
    }
    // SQLSTATE class 22 (data exception): the extracted text itself cannot be stored, and never
    // will be; retrying would only delay the same failure.
    if (isDataException(err)) {
      return await fail(
        ctx,
        job,
        `Cannot store the book read from "${job.source_path}": ${(err as Error).message}`,
      );
    }
    return await retryLater(ctx, job, err);
  }
}

type TxFragment = ReturnType<TxSql>;

// Every write that settles a claimed row goes through here (the completion excepted: it fences
// inside the transaction that saves the edition). It matches the row as this run claimed it; 0
// rows means the claim was lost: log it, change nothing (docs/development.md). The event is published
// only once the write has committed.
async function settle(
  ctx: IngestionContext,
  job: IngestionJob,
  changes: (sql: TxSql) => TxFragment,
  event: Pick<JobEvent, "transition" | "status" | "attempt" | "error">,
): Promise<boolean> {
  return await settleClaim(ctx, name, job.id, event, async (sql) =>
    (await sql`
      update ingestion_jobs
      set ${changes(sql)}, claimed_by = null, updated_at = now()
      where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}`).count);
}

async function fail(ctx: IngestionContext, job: IngestionJob, why: string): Promise<void> {
  // Relative to STORAGE_DIR, no credential (lib/job_error.ts).
  const reason = jobError(why, ctx.storageDir);
  const failed = await settle(
    ctx,
    job,
    (sql) => sql`status = 'Failed', error = ${reason}, finished_at = now()`,
    { transition: "failed", status: "Failed", attempt: job.attempt_count, error: reason },
  );
  if (failed) ctx.log.warn({ queue: name, id: job.id, reason }, "job failed");
}

// A transient fault (I/O, connection) is not the file's fault: run again after a delay while
// under the cap, then Failed with the last fault as the reason.
async function retryLater(ctx: IngestionContext, job: IngestionJob, err: unknown): Promise<void> {
  const detail = jobError(err instanceof Error ? err.message : String(err), ctx.storageDir);
  await retryUnderCap(job, MAX_ATTEMPTS, detail, {
    fail: (reason) => fail(ctx, job, reason),
    retry: async (reason) => {
      const delayMs = RETRY_DELAY_MS * job.attempt_count;
      const queued = await settle(
        ctx,
        job,
        (sql) =>
          sql`status = 'Queued', error = ${reason}, claimed_at = null,
              run_after = now() + ${delayMs} * interval '1 millisecond'`,
        { transition: "failed", status: "Queued", attempt: job.attempt_count, error: reason },
      );
      if (queued) {
        ctx.log.warn({ queue: name, id: job.id, err: detail, delayMs }, "job will be retried");
      }
    },
  });
}
