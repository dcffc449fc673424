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
import { type Fragment, runCancellable, type Sql, transaction, type TxSql } from "../../lib/db.ts";
import type { JobEvent } from "../../lib/events.ts";
import {
  CANCELLED,
  type ClaimedJob,
  type ClaimNext,
  isRunTimeout,
  type OrphanScope,
  type QueueContext,
  type RecoverOn,
  settleClaim,
} from "../../lib/queue.ts";
import { extractBook, type ExtractedBook, UnreadableBookError } from "../../books/extract.ts";
import { publishAssets, REPAIR_BUDGET_MS, repairAssets } from "./_assets.ts";
import { saveResources } from "./_fidelity.ts";
import { resolveSourceFile } from "../../books/source_path.ts";
import { jobError } from "../../lib/job_error.ts";

/** Queue name used in logs, events and the lock key. */
export const name = "ingestion";
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
/** Attempts before a job is `Failed` for good (ADR-022: "3, then Failed"). */
export const MAX_ATTEMPTS = 3;
/** Delay before a transient failure is retried, in ms, per attempt already made. */
export const RETRY_DELAY_MS = 5000;
/** Finished jobs deleted per statement by {@linkcode prune}. */
export const PRUNE_BATCH = 500;
/** Longest one poll tick spends pruning, in ms; the rest waits for the next tick. */
export const PRUNE_BUDGET_MS = 250;

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

/**
 * A part of the completing statement that another queue adds (auto-publish creates the
 * edition's job): it commits with the save or not at all, and costs no round trip.
 */
export interface EditionSavedHook {
  /**
   * @param sql the client the completing statement runs on.
   * @param editionId the saved edition's id, as a SQL expression (NULL when nothing was saved).
   * @returns a data-modifying statement; its rows are counted for {@linkcode report}.
   */
  statement(sql: Sql | TxSql, editionId: Fragment): Fragment;
  /** Called once the save committed, with the edition and the statement's row count. */
  report(editionId: string, rows: number): void;
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
  /** Every attempt that ended, oldest first (the last 20; sql/010_operations.sql). */
  attempts: AttemptRecord[];
}

/** One ended attempt, as the settling write's trigger recorded it (sql/010_operations.sql). */
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

/** Thrown inside the completing transaction when its fence matched no row: the claim was lost. */
export class ClaimLostError extends Error {
  override name = "ClaimLostError";
}

// --- Enqueue, read, admin retry (the API's statements) ---

/**
 * Fail stale rows at the attempts cap, and rewrite chapter assets whose post-commit write was cut
 * short. Runs at lock acquisition and on the poll tick ({@linkcode recoverOn}); partial indexes
 * keep both independent of the backlog (`ingestion_jobs_processing`, `editions_assets_behind`).
 * Below the cap a stale row is not touched here: {@linkcode claim} takes it again.
 *
 * @param signal stops an asset repair between files (shutdown).
 */
export async function recover(ctx: IngestionContext, signal: AbortSignal): Promise<void> {
  const rows = await ctx.sql<{ id: string; attempt_count: number }[]>`
    update ingestion_jobs
    set status = 'Failed', claimed_by = null, finished_at = now(), updated_at = now(),
        error = 'interrupted: attempts exhausted (' || attempt_count || ' of ' || ${MAX_ATTEMPTS}::int
                || '); the last run stopped without finishing'
    where status = 'Processing'
      and claimed_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
      and attempt_count >= ${MAX_ATTEMPTS}
    returning id, attempt_count`;
  for (const row of rows) {
    ctx.log.warn({ queue: name, id: row.id }, "stale job failed at the attempts cap");
    ctx.events.publish({
      queue: name,
      id: row.id,
      transition: "recovered",
      status: "Failed",
      attempt: row.attempt_count,
    });
  }
  // Bounded in time, and its faults never block the claims: the chapters are in
  // the database, and the next wake repairs the rest.
  const budget = AbortSignal.any([signal, AbortSignal.timeout(REPAIR_BUDGET_MS)]);
  try {
    await repairAssets(ctx, budget);
  } catch (err) {
    if (signal.aborted) return;
    if (budget.aborted) {
      ctx.log.info(
        { queue: name, budgetMs: REPAIR_BUDGET_MS },
        "asset repair paused at its budget",
      );
    } else {
      ctx.log.error({ queue: name, err }, "asset repair failed; claiming anyway");
    }
  }
}

/**
 * Recover every row still in flight, once per lock acquisition (the lock proves their consumer is
 * gone). A row claimed by another boot id follows the crash rule: `Queued` and due at
 * once with its attempt spent, or `Failed` at the cap. A row claimed by this boot id was cut off
 * by a lost lock (a database restart), not by a crash: it is given back, the attempt not counted,
 * so database blips never use up a job's attempts. One statement.
 *
 * @param _signal unused: one statement.
 * @param scope `"own"`: this boot id's rows only (the consumer's sweep after a claim whose reply was
 *   lost; lib/consumer.ts {@linkcode OrphanScope}).
 * @throws the database error (the consumer retries with backoff).
 */
export async function recoverOrphans(
  ctx: IngestionContext,
  _signal: AbortSignal,
  scope: OrphanScope = "all",
): Promise<void> {
  const rows = await ctx.sql<
    { id: string; status: IngestionStatus; attempt_count: number; own: boolean }[]
  >`
    with orphans as (
      select id, claimed_by is not distinct from ${ctx.bootId}::uuid as own
      from ingestion_jobs
      where status = 'Processing'
        ${scope === "own" ? ctx.sql`and claimed_by = ${ctx.bootId}` : ctx.sql``}
      for update
    )
    update ingestion_jobs j
    set status = case when o.own or j.attempt_count < ${MAX_ATTEMPTS} then 'Queued' else 'Failed' end,
        attempt_count = case when o.own then greatest(j.attempt_count - 1, 0) else j.attempt_count end,
        error = case
          when o.own then null
          when j.attempt_count < ${MAX_ATTEMPTS} then 'interrupted: attempt ' || j.attempt_count
            || ' of ' || ${MAX_ATTEMPTS}::int || ' stopped without finishing (consumer gone); will retry'
          else 'interrupted: attempts exhausted (' || j.attempt_count || ' of ' || ${MAX_ATTEMPTS}::int
            || '); the last run stopped without finishing' end,
        run_after = case when o.own then j.run_after else now() end,
        finished_at = case when o.own or j.attempt_count < ${MAX_ATTEMPTS} then null else now() end,
        claimed_by = null, claimed_at = null, updated_at = now()
    from orphans o
    where j.id = o.id
    returning j.id, j.status, j.attempt_count, o.own`;
  for (const row of rows) {
    ctx.log.warn(
      { queue: name, id: row.id, status: row.status, own: row.own },
      row.own ? "orphan given back (lock lost mid-run)" : "orphan recovered (its consumer is gone)",
    );
    ctx.events.publish({
      queue: name,
      id: row.id,
      transition: row.own ? "given_back" : "recovered",
      status: row.status,
      attempt: row.attempt_count,
    });
  }
}

/**
 * Time until the earliest `Queued` job waiting on a future `run_after` (a transient retry)
 * becomes due, on the database clock; the consumer arms a wake for it.
 *
 * @returns ms from now, or null when no job waits for a future time.
 */
export async function nextDueMs(ctx: IngestionContext): Promise<number | null> {
  const [row] = await ctx.sql<{ ms: number | null }[]>`
    select (extract(epoch from min(run_after) - now()) * 1000)::float8 as ms
    from ingestion_jobs
    where status = 'Queued' and run_after > now()`;
  return row.ms;
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
  publishClaimed(ctx, job);
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

function publishClaimed(ctx: IngestionContext, job: IngestionJob): void {
  ctx.events.publish({
    queue: name,
    id: job.id,
    transition: "claimed",
    status: "Processing",
    attempt: job.attempt_count,
    runnableForS: job.runnable_for_s,
  });
}

/**
 * Delete finished jobs (`Completed`, `Failed`) whose `finished_at` is more than
 * `INGESTION_RETENTION_DAYS` ago, {@linkcode PRUNE_BATCH} rows per statement, for at most
 * {@linkcode PRUNE_BUDGET_MS}; the rest waits for the next tick. The consumer calls it
 * on the poll tick, never before a claim. A `Failed` job past the retention goes too: its admin
 * retry with it. Does nothing when no retention is set.
 *
 * @param signal stops between batches (shutdown, a lost lock).
 * @throws the database error (the round backs off and the next tick tries again).
 */
export async function prune(ctx: IngestionContext, signal: AbortSignal): Promise<void> {
  const days = ctx.retentionDays;
  if (!days) return;
  const until = performance.now() + PRUNE_BUDGET_MS;
  let deleted = 0;
  while (!signal.aborted) {
    // The outer conditions repeat the inner ones: a row an admin retried after the inner read is
    // re-checked on its new version and kept.
    const { count } = await ctx.sql`
      delete from ingestion_jobs
      where id = any(array(
          select id from ingestion_jobs
          where status in ('Completed', 'Failed')
            and finished_at < now() - ${days} * interval '1 day'
          order by finished_at
          limit ${PRUNE_BATCH}))
        and status in ('Completed', 'Failed')
        and finished_at < now() - ${days} * interval '1 day'`;
    deleted += count;
    if (count < PRUNE_BATCH || performance.now() > until) break;
  }
  if (deleted > 0) {
    ctx.log.info({ queue: name, deleted, retentionDays: days }, "finished jobs pruned");
  }
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
  if (job.attempt_count >= MAX_ATTEMPTS) {
    const error = `attempts exhausted (${job.attempt_count} of ${MAX_ATTEMPTS}): ${reason}`;
    return await settle(
      ctx,
      job,
      (sql) => sql`status = 'Failed', error = ${error}, finished_at = now()`,
      { transition: "failed", status: "Failed", attempt: job.attempt_count, error },
    );
  }
  const error = `attempt ${job.attempt_count} of ${MAX_ATTEMPTS} failed, will retry: ${reason}`;
  return await settle(
    ctx,
    job,
    (sql) => sql`status = 'Queued', error = ${error}, claimed_at = null, run_after = now()`,
    { transition: "failed", status: "Queued", attempt: job.attempt_count, error },
  );
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
    return await save(ctx, job, book, signal, claimNext);
  } catch (err) {
    if (err instanceof ClaimLostError) {
      ctx.log.warn({ queue: name, id: job.id }, "completion matched no row: the claim was lost");
      return;
    }
    if (signal.aborted) {
      if (!isRunTimeout(signal.reason)) throw signal.reason;
      return await retryLater(ctx, job, signal.reason);
    }
    if (err instanceof UnreadableBookError || err instanceof RangeError) {
      return await fail(ctx, job, err.message);
    }
    // SQLSTATE class 22 (data exception): the extracted text itself cannot be stored, and never
    // will be; retrying would only delay the same failure.
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("22")) {
      return await fail(
        ctx,
        job,
        `Cannot store the book read from "${job.source_path}": ${(err as Error).message}`,
      );
    }
    return await retryLater(ctx, job, err);
  }
}

/** What the completing statement answers: the fence, the saved edition, the chained job. */
interface Saved {
  /** The fence matched (the job was still this run's claim). */
  fenced: boolean;
  /** The saved edition; null only when the fence missed or a re-ingested edition is gone. */
  edition_id: string | null;
  asset_version: number | null;
  /** A new edition (nothing of it can be on disk yet), not a re-ingest. */
  created: boolean;
  /** Rows the {@linkcode EditionSavedHook}'s statement returned. */
  hooked: number;
  /** The chained claim's job, all null when it claimed none. */
  next_id: string | null;
  next_source_path: string | null;
  next_edition_id: string | null;
  next_attempt_count: number | null;
  next_claimed_by: string | null;
  next_runnable_for_s: number | null;
}

async function save(
  ctx: IngestionContext,
  job: IngestionJob,
  book: ExtractedBook,
  signal: AbortSignal,
  claimNext: ClaimNext | undefined,
): Promise<IngestionJob | null | undefined> {
  const resources = book.resources ?? [];
  let chained = false;
  const statement = (sql: Sql | TxSql) => {
    const fence = claimNext?.(sql) ?? null;
    chained = fence !== null;
    return sql<Saved[]>`${saveStatement(ctx, sql, job, book, fence)}`;
  };
  // The statement writes nothing unless its fence matched and the edition was saved, so when
  // either is missing there is nothing to roll back, even where it committed on its own.
  const check = (saved: Saved): { id: string; assetVersion: number } => {
    if (!saved.fenced) throw new ClaimLostError(`Lost the claim on ingestion job ${job.id}`);
    // ingestion_jobs.edition_id references editions, so the edition cannot vanish under the job.
    if (!saved.edition_id || saved.asset_version === null) {
      throw new Error(`Cannot re-ingest: edition ${job.edition_id} does not exist`);
    }
    return { id: saved.edition_id, assetVersion: saved.asset_version };
  };
  let saved: Saved;
  if (resources.length === 0) {
    // Nothing else to write: the statement is the transaction.
    [saved] = await runCancellable(ctx.sql, statement, signal);
    check(saved);
  } else {
    saved = await transaction(ctx.sql, ctx.log, async (tx) => {
      const [row] = await statement(tx.sql);
      await saveResources(tx.sql, check(row).id, resources);
      return row;
    }, signal);
  }
  // Committed from here on.
  const edition = check(saved);
  ctx.onEditionSaved?.report(edition.id, saved.hooked);
  try {
    await publishAssets(
      ctx,
      edition.id,
      edition.assetVersion,
      book.chapters,
      resources,
      signal,
      saved.created,
    );
  } catch (err) {
    // The database holds the chapters: recover() rewrites the assets on the next poll tick.
    if (signal.aborted) {
      ctx.log.info(
        { queue: name, edition: edition.id },
        "asset write interrupted; it will be redone",
      );
    } else {
      ctx.log.error(
        { queue: name, edition: edition.id, err },
        "asset write failed; it will be redone",
      );
    }
  }
  ctx.events.publish({
    queue: name,
    id: job.id,
    transition: "completed",
    status: "Completed",
    attempt: job.attempt_count,
  });
  const next: IngestionJob | null = saved.next_id === null ? null : {
    id: saved.next_id,
    source_path: saved.next_source_path!,
    edition_id: saved.next_edition_id,
    attempt_count: saved.next_attempt_count!,
    claimed_by: saved.next_claimed_by!,
    runnable_for_s: saved.next_runnable_for_s,
  };
  if (next) publishClaimed(ctx, next);
  ctx.log.info({ queue: name, id: job.id, chapters: book.chapters.length }, "job completed");
  return chained ? next : undefined;
}

// The completing statement: fence, edition, chapters, `Completed`, the hook's part and the
// chained claim, one round trip (it was nine statements in a transaction). Its parts, in
// the order they take effect:
// - `job`: the fence. It also row-locks the job, so a concurrent give-back waits and then matches
//   nothing, instead of un-counting a completed job. Every write below depends on it.
// - `created` / `updated`: a new edition (asset version 1) or the re-ingested one (version + 1),
//   with what the chapters alone do not hold (language, direction, warnings; and the
//   licence, kept beside the chapters, never in them).
// - `chapters`: one row per chapter from two arrays (no per-row parameters, so a 2,000-chapter
//   book is one statement too). A re-ingest overwrites positions it has, and `tail` deletes the
//   positions past its end: no row is both deleted and inserted by this one statement, whose
//   parts all see the same snapshot (a delete-then-insert of one key here would collide).
// - `stale_resources`: a re-ingest's old resources; new ones are inserted after this statement,
//   in the same transaction.
// - `completed`: the job's own row, which names the edition it made.
// - `hooked`: the part another queue adds (auto-publish creates the edition's job).
// - `next`: the chained claim, under the lock's fence (`false` when not chaining), and only once
//   `completed` matched: the `exists` is evaluated before the claim's scan, so `completed` has
//   run by then, and the claim's `for update` skips the row this statement updated — the stale
//   branch can never hand back this very job (tests/lib/cost_test.ts).
function saveStatement(
  ctx: IngestionContext,
  sql: Sql | TxSql,
  job: IngestionJob,
  book: ExtractedBook,
  fence: Fragment | null,
): Fragment {
  const warnings = (book.warnings ?? []).map(({ kind, message }) => ({ kind, message }));
  const editionId = job.edition_id;
  const chained = fence ? sql`${fence} and exists (select from completed)` : sql`false`;
  const hook = ctx.onEditionSaved?.statement(sql, sql`(select id from edition)`) ??
    sql`select where false`;
  return sql`
    with job as (
      select id from ingestion_jobs
      where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}
      for update
    ),
    created as (
      insert into editions
        (title, author, format, language, direction, warnings, licence, asset_version)
      select ${book.title}, ${book.author}, ${book.format}, ${book.language ?? null},
             ${book.direction ?? null}, ${sql.json(warnings)}, ${book.licence ?? null}, 1
      from job where ${editionId}::bigint is null
      returning id, asset_version
    ),
    updated as (
      update editions
      set title = ${book.title}, author = ${book.author}, format = ${book.format},
          language = ${book.language ?? null}, direction = ${book.direction ?? null},
          warnings = ${sql.json(warnings)}, licence = ${book.licence ?? null},
          asset_version = asset_version + 1, updated_at = now()
      where id = ${editionId}::bigint and exists (select from job)
      returning id, asset_version
    ),
    edition as (
      select id, asset_version, true as created from created
      union all
      select id, asset_version, false from updated
    ),
    chapters as (
      insert into chapters (edition_id, position, title, html)
      select edition.id, c.position::int, c.title, c.html
      from edition,
        unnest(${sql.array(book.chapters.map((c) => c.title))}::text[],
               ${sql.array(book.chapters.map((c) => c.html))}::text[])
          with ordinality as c(title, html, position)
      on conflict (edition_id, position) do update set title = excluded.title, html = excluded.html
    ),
    tail as (
      delete from chapters
      where edition_id = (select id from updated) and position > ${book.chapters.length}
    ),
    stale_resources as (
      delete from resources where edition_id = (select id from updated)
    ),
    completed as (
      update ingestion_jobs j
      set status = 'Completed', error = null, claimed_by = null, finished_at = now(),
          updated_at = now(), edition_id = edition.id
      from edition
      where j.id = (select id from job)
      returning j.id
    ),
    hooked as (${hook}),
    next as (${claimStatement(ctx, sql, chained)})
    select exists (select from job) as fenced, edition.id as edition_id, edition.asset_version,
           coalesce(edition.created, false) as created, (select count(*)::int from hooked) as hooked,
           next.id as next_id, next.source_path as next_source_path,
           next.edition_id as next_edition_id, next.attempt_count as next_attempt_count,
           next.claimed_by as next_claimed_by, next.runnable_for_s as next_runnable_for_s
    from (select) as one
      left join edition on true
      left join next on true`;
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
  if (job.attempt_count >= MAX_ATTEMPTS) {
    const reason = `attempts exhausted (${job.attempt_count} of ${MAX_ATTEMPTS}): ${detail}`;
    return await fail(ctx, job, reason);
  }
  const reason = `attempt ${job.attempt_count} of ${MAX_ATTEMPTS} failed, will retry: ${detail}`;
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
}
