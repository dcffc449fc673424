/**
 * The user ingestion queue: a reader's own upload. Table `user_ingestion_jobs`
 * (sql/004_user_ingestion.sql), one job per `user_books` row, consumed by this process's one
 * user-ingestion consumer (lib/consumer.ts), fed by `POST /internal/user-books`.
 *
 * Transitions (ADR-022 row 2; job / user book):
 * - Queued → Processing: {@linkcode claim} (counts the attempt, stamps `claimed_by`).
 * - Processing → Completed / Processing → Ready: {@linkcode run}, in the transaction that saves
 *   the chapters; the same commit sets the book's enrichment `Pending` (its own NOTIFY wakes the
 *   enricher; nothing starts it inline — ADR-022, the deleted kick).
 * - Processing → Failed / → Failed with {@linkcode PARSE_FAILED_MESSAGE}: {@linkcode run} when
 *   the file cannot be read as a book (at once, no retry; an encrypted EPUB included).
 * - Processing → Failed / → Failed with {@linkcode INTERRUPTED_MESSAGE}: attempts used up by
 *   crashes, timeouts or transient faults ({@linkcode recover}, {@linkcode recoverOrphans},
 *   {@linkcode run}); a permanent fault that is not the file's either.
 * - Processing → Queued: {@linkcode run} for a transient fault under the cap (after a delay);
 *   {@linkcode giveBack} on shutdown (attempt not counted, no error, the book stays Processing).
 * - Failed → Queued / Failed → Processing: {@linkcode retry}, the admin retry;
 *   {@linkcode bulkRetry} for every `Failed` job matching a filter, in one statement.
 * - Queued → Failed / Processing → Failed with {@linkcode CANCELLED_MESSAGE}: {@linkcode cancel},
 *   the admin cancel; a `Processing` job's run is stopped first and settled by
 *   {@linkcode cancelRun} (fenced).
 *
 * Stale rule: a `Processing` row claimed more than `staleAfterMs` ago (default 2 min) is taken
 * again by the claim while `attempt_count` < {@linkcode MAX_ATTEMPTS}; {@linkcode recover}, run on
 * every wake, fails it at the cap. {@linkcode recoverOrphans}, run once each time the consumer
 * takes its lock, treats every in-flight row as orphaned at once.
 *
 * @module
 */
import type { QueueDefaults } from "../../lib/config.ts";
import type { Fragment, TxSql } from "../../lib/db.ts";
import type { JobEvent } from "../../lib/events.ts";
import { CANCELLED, type ClaimedJob, type QueueContext, settleClaim } from "../../lib/queue.ts";
import { claimed, isDataException, retryUnderCap, runFault } from "../../lib/queue_flow.ts";
import { extractBook, UnreadableBookError } from "../../books/extract.ts";
import { resolveSourceFile } from "../../books/source_path.ts";
import { jobError } from "../../lib/job_error.ts";
import { save, writeChapterAssets } from "./_library.ts";
import { INTERRUPTED_MESSAGE, MAX_ATTEMPTS, name } from "./_constants.ts";

export { INTERRUPTED_MESSAGE, MAX_ATTEMPTS, name } from "./_constants.ts";
export { ClaimLostError } from "../../lib/queue_flow.ts";
export { userBookDir } from "./_library.ts";
export { recover, recoverOrphans } from "./_recovery.ts";

/** The queue table; NOTIFY channel `<schema>.user_ingestion_jobs`. */
export const table = "user_ingestion_jobs";
/**
 * Settings: `USER_INGESTION_STALE_AFTER_MS` (default 2 min, ADR-022 row 2) and
 * `USER_INGESTION_TIMEOUT_MS` (default 5 min: a reader's upload is at most `MAX_UPLOAD_BYTES`).
 */
export const defaults: QueueDefaults = {
  envPrefix: "USER_INGESTION",
  staleAfterMs: 120_000,
  timeoutMs: 300_000,
};
/** Delay before a transient failure is retried, in ms, per attempt already made. */
export const RETRY_DELAY_MS = 5000;
/** The reader's message for a file that cannot be read as a book. */
export const PARSE_FAILED_MESSAGE =
  "Could not read this file. It may be corrupted or password-protected.";

/** The reader's message for a book whose processing an admin cancelled. */
export const CANCELLED_MESSAGE = "Processing of this file was cancelled.";

/** Statuses of `user_ingestion_jobs.status`. */
export type UserIngestionStatus = "Queued" | "Processing" | "Completed" | "Failed";
/** Statuses of `user_books.status`. */
export type UserBookStatus = "Processing" | "Ready" | "Failed";

/** What this queue's verbs need beyond {@linkcode QueueContext}. */
export interface UserIngestionContext extends QueueContext {
  /** Root directory of uploads and user book assets. */
  readonly storageDir: string;
  /** A Processing row claimed longer ago than this (ms) is stale. */
  readonly staleAfterMs: number;
}

/** A claimed job, as the claim wrote it (the fence for every later write). */
export interface UserIngestionJob extends ClaimedJob {
  readonly user_book_id: string;
  readonly source_path: string;
  readonly claimed_by: string;
}

/** A job row as the API shows it. */
export interface UserIngestionJobRow {
  id: string;
  user_book_id: string;
  source_path: string;
  status: UserIngestionStatus;
  attempt_count: number;
  error: string | null;
  claimed_by: string | null;
  claimed_at: Date | null;
  run_after: Date;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  /** Every attempt that ended, oldest first (the last 20; sql/012_operations.sql). */
  attempts: unknown[];
}

/** A job as the list route shows it: the row, its book's title and status, its subject. */
export interface UserIngestionListRow extends UserIngestionJobRow {
  title: string | null;
  book_status: UserBookStatus;
  subject: string;
}

/** A user book as the API shows it (the enrichment columns are shown apart). */
export interface UserBookRow {
  id: string;
  owner_id: string;
  title: string | null;
  author: string | null;
  format: string | null;
  status: UserBookStatus;
  error: string | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Claim the oldest runnable job: `Queued` and due, or `Processing` but stale and under the cap.
 * One statement, so the claim and the counted attempt commit together; the scalar
 * `id = (select … for update skip locked limit 1)` takes exactly one row (docs/development.md).
 *
 * @param lockHeld the queue lock's claim fence (lib/lock.ts): without the lock, nothing is claimed.
 *   Omitted only by tests that call the verb directly.
 * @returns the claimed job, or null when nothing is runnable.
 */
export async function claim(
  ctx: UserIngestionContext,
  lockHeld?: Fragment,
): Promise<UserIngestionJob | null> {
  const [row] = await ctx.sql<(UserIngestionJob & { runnable_for_s: number | null })[]>`
    update user_ingestion_jobs
    set status = 'Processing', attempt_count = attempt_count + 1, claimed_by = ${ctx.bootId},
        claimed_at = now(), updated_at = now()
    where id = (
      select id from user_ingestion_jobs
      where ${lockHeld ?? ctx.sql`true`}
        and ((status = 'Queued' and run_after <= now())
          or (status = 'Processing'
              and claimed_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
              and attempt_count < ${MAX_ATTEMPTS}))
      order by id
      for update skip locked
      limit 1
    )
    returning id, user_book_id, source_path, attempt_count, claimed_by, (
      -- The wake latency: a subquery in RETURNING reads the statement's snapshot, so it
      -- sees the row as it was before this claim: runnable since its last write (insert,
      -- give-back, retry) or its run_after, whichever is later; null for a stale re-pick.
      select extract(epoch from now() - greatest(o.run_after, o.updated_at))::float8
      from user_ingestion_jobs o where o.id = user_ingestion_jobs.id and o.status = 'Queued'
    ) as runnable_for_s`;
  return claimed(ctx, name, "Processing", row);
}

/**
 * Give a claimed job back on shutdown: `Queued`, the attempt un-counted, no error text; the user
 * book stays `Processing` (ADR-022: a shutdown is never Failed, never "corrupted"). Fenced.
 *
 * @returns false when the fence matched no row.
 */
export async function giveBack(ctx: UserIngestionContext, job: UserIngestionJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) =>
      sql`status = 'Queued', attempt_count = attempt_count - 1, error = null, claimed_at = null`,
    null,
    { transition: "given_back", status: "Queued", attempt: job.attempt_count - 1 },
  );
}

/**
 * Settle a run an admin cancelled, once it has stopped: `Failed` with {@linkcode CANCELLED}, its
 * book `Failed` with {@linkcode CANCELLED_MESSAGE}. Fenced on the claim.
 *
 * @returns false when the fence matched no row.
 */
export async function cancelRun(
  ctx: UserIngestionContext,
  job: UserIngestionJob,
): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) => sql`status = 'Failed', error = ${CANCELLED}, finished_at = now()`,
    CANCELLED_MESSAGE,
    { transition: "cancelled", status: "Failed", attempt: job.attempt_count, error: CANCELLED },
  );
}

/**
 * Read the upload: extract it, write its chapter assets, then save the chapters, the book `Ready`
 * with its title, author and format, its enrichment `Pending`, and the job `Completed` in one
 * fenced transaction. A file that is not a book fails at once with {@linkcode
 * PARSE_FAILED_MESSAGE}; any other fault is retried under the cap.
 *
 * Assets are written before the commit, each file renamed into place: a user book is read once,
 * so a re-run writes the same files, and `Ready` is never visible before its assets are.
 *
 * @param signal aborted on shutdown or a lost lock: the run then rejects with its reason and
 *   saves nothing (the consumer gives the claim back).
 * @throws the signal's reason when aborted.
 */
export async function run(
  ctx: UserIngestionContext,
  job: UserIngestionJob,
  signal: AbortSignal,
): Promise<void> {
  try {
    const book = await extractBook(
      await resolveSourceFile(ctx.storageDir, job.source_path),
      signal,
    );
    // An extractor may return a truncated result on cancel instead of throwing (ADR-022).
    signal.throwIfAborted();
    await writeChapterAssets(ctx.storageDir, job.user_book_id, book, signal);
    await save(ctx, job, book, signal);
  } catch (err) {
    const fault = runFault(ctx, name, job.id, err, signal);
    if (fault === "lost") return;
    if (fault === "timeout") return await retryLater(ctx, job, signal.reason);
    if (err instanceof UnreadableBookError) {
      return await fail(ctx, job, err.message, PARSE_FAILED_MESSAGE);
    }
    // Permanent, but not the file's fault as far as the reader can tell: a path outside
    // STORAGE_DIR (RangeError), or text Postgres cannot store (SQLSTATE class 22).
    if (err instanceof RangeError || isDataException(err)) {
      return await fail(ctx, job, (err as Error).message, INTERRUPTED_MESSAGE);
    }
    return await retryLater(ctx, job, err);
  }
}

type TxFragment = ReturnType<TxSql>;

// Every write that settles a claimed row goes through here (the completion excepted). It matches
// the row as this run claimed it; 0 rows means the claim was lost: log it, change nothing
// (docs/development.md). `bookError`, when given, fails the user book in the same transaction.
async function settle(
  ctx: UserIngestionContext,
  job: UserIngestionJob,
  changes: (sql: TxSql) => TxFragment,
  bookError: string | null,
  event: Pick<JobEvent, "transition" | "status" | "attempt" | "error">,
): Promise<boolean> {
  return await settleClaim(ctx, name, job.id, event, async (sql) => {
    const rows = await sql`
      update user_ingestion_jobs
      set ${changes(sql)}, claimed_by = null, updated_at = now()
      where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}`;
    if (rows.count > 0 && bookError !== null) {
      await sql`
        update user_books set status = 'Failed', error = ${bookError}, updated_at = now()
        where id = ${job.user_book_id} and status = 'Processing'`;
    }
    return rows.count;
  });
}

async function fail(
  ctx: UserIngestionContext,
  job: UserIngestionJob,
  reason: string,
  readerMessage: string,
): Promise<void> {
  reason = jobError(reason, ctx.storageDir);
  const failed = await settle(
    ctx,
    job,
    (sql) => sql`status = 'Failed', error = ${reason}, finished_at = now()`,
    readerMessage,
    { transition: "failed", status: "Failed", attempt: job.attempt_count, error: reason },
  );
  if (failed) ctx.log.warn({ queue: name, id: job.id, reason }, "job failed");
}

// A transient fault (I/O, connection, a run timeout) is not the file's fault: run again after a
// delay while under the cap, then Failed with the non-blaming message.
async function retryLater(
  ctx: UserIngestionContext,
  job: UserIngestionJob,
  err: unknown,
): Promise<void> {
  const detail = jobError(err instanceof Error ? err.message : String(err), ctx.storageDir);
  await retryUnderCap(job, MAX_ATTEMPTS, detail, {
    fail: (reason) => fail(ctx, job, reason, INTERRUPTED_MESSAGE),
    retry: async (reason) => {
      const delayMs = RETRY_DELAY_MS * job.attempt_count;
      const queued = await settle(
        ctx,
        job,
        (sql) =>
          sql`status = 'Queued', error = ${reason}, claimed_at = null,
              run_after = now() + ${delayMs} * interval '1 millisecond'`,
        null,
        { transition: "failed", status: "Queued", attempt: job.attempt_count, error: reason },
      );
      if (queued) {
        ctx.log.warn({ queue: name, id: job.id, err: detail, delayMs }, "job will be retried");
      }
    },
  });
}
