/**
 * The metadata enrichment queue: the `metadata_enrichment_*` columns of `user_books`
 * (sql/005_enrichment.sql), consumed by this process's one enrichment consumer (lib/consumer.ts).
 * A book enters it when user ingestion saves it `Ready` (same commit); that statement's NOTIFY on
 * `<schema>.user_books` wakes the consumer — nothing starts a run inline (ADR-022).
 *
 * Transitions (ADR-022 row 3):
 * - Pending → Running: {@linkcode claim} (counts the attempt, stamps the claim's boot id).
 * - Running → Completed: {@linkcode run}, saving the metadata (local engine always, remote when
 *   `ENRICHMENT_API_URL` is set).
 * - Running → Failed: {@linkcode run} for a permanent fault (a malformed answer, an HTTP 4xx), or
 *   any fault at the attempts cap.
 * - Running → Pending: {@linkcode run} for a transient fault under the cap (attempt spent; when
 *   the provider asked to wait longer than a run waits, not claimed again before that wait has
 *   passed: `metadata_enrichment_run_after`, {@linkcode nextDueMs}); {@linkcode giveBack} on
 *   shutdown (attempt not counted, no error), also during a provider's wait.
 * - Running (stale) → Pending, or → Failed at the cap: {@linkcode recover}, on every wake.
 * - Running (orphaned) → Pending / Failed: {@linkcode recoverOrphans}, once each time the consumer
 *   takes the queue lock.
 * - Failed → Pending: {@linkcode retry}, the admin retry (attempts reset, error cleared);
 *   {@linkcode bulkRetry} for every `Failed` book matching a filter, in one statement.
 * - Pending → Failed: {@linkcode cancel}, the admin cancel (error `cancelled by admin`); a
 *   `Running` book's run is stopped first and settled by {@linkcode cancelRun} (fenced).
 *
 * The admin retry gives the book a new intent for the Idempotency-Key. The local metadata is saved
 * by every settle of a run that computed it, the provider's fault included (docs/enrichment.md).
 *
 * Stale rule: `Running` started more than `staleAfterMs` ago (default 10 min) → `Pending`, the
 * attempt spent. Beyond the ADR: at {@linkcode MAX_ATTEMPTS} it is `Failed` instead, so
 * one book can never loop on paid calls.
 *
 * @module
 */
import type { QueueDefaults } from "../../lib/config.ts";
import type { Fragment, TxSql } from "../../lib/db.ts";
import type { JobEvent } from "../../lib/events.ts";
import { CANCELLED, type ClaimedJob, type QueueContext, settleClaim } from "../../lib/queue.ts";
import { claimed, retryUnderCap, runFault } from "../../lib/queue_flow.ts";
// The engines (_local.ts, _remote.ts) are loaded on the first run, not at startup (_metadata.ts).
import { enrich, type Metadata, type TokenTally } from "./_metadata.ts";
import type { RemoteEngine } from "./_settings.ts";
import { jobError } from "../../lib/job_error.ts";
import { MAX_ATTEMPTS, name } from "./_constants.ts";

export { MAX_ATTEMPTS, name } from "./_constants.ts";
export { EXCERPT_CHARS, type Metadata, tokensUsed, type TokenTally } from "./_metadata.ts";
export { readRemoteSettings, type RemoteEngine, remoteEngine } from "./_settings.ts";
export { recover, recoverOrphans } from "./_recovery.ts";

/** The queue's table; NOTIFY channel `<schema>.user_books`. */
export const table = "user_books";
/**
 * Settings: `ENRICHMENT_STALE_AFTER_MS` (default 10 min, ADR-022 row 3) and
 * `ENRICHMENT_TIMEOUT_MS` (default 3 min: one remote call plus the local counts).
 */
export const defaults: QueueDefaults = {
  envPrefix: "ENRICHMENT",
  staleAfterMs: 600_000,
  timeoutMs: 180_000,
};

/** Statuses of `user_books.metadata_enrichment_status`. */
export type EnrichmentStatus = "Pending" | "Running" | "Completed" | "Failed";

/** What this queue's verbs need beyond {@linkcode QueueContext}. */
export interface EnrichmentContext extends QueueContext {
  /** A Running row started longer ago than this (ms) is stale. */
  readonly staleAfterMs: number;
  /** Null: the local engine only. */
  readonly remote: RemoteEngine | null;
  /** Where the tokens of each request are added up; {@linkcode tokensUsed} when absent. */
  readonly tokens?: TokenTally;
}

/** A claimed enrichment: the user book's id and the claim's fence. */
export interface EnrichmentJob extends ClaimedJob {
  readonly claimed_by: string;
  /** The intent (uuid) of the Idempotency-Key; new at every admin retry. */
  readonly intent: string;
  readonly title: string | null;
  readonly author: string | null;
}

/** A book's enrichment as the API shows it: the status columns and the metadata fields. */
export interface EnrichmentView {
  status: EnrichmentStatus | null;
  attempt_count: number;
  error: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  /** Every attempt that ended, oldest first (the last 20; sql/012_operations.sql). */
  attempts: unknown[];
  language: string | null;
  word_count: number | null;
  reading_time_minutes: number | null;
  summary: string | null;
  [field: string]: unknown;
}

// --- Read, admin retry (the API's statements) ---

/** A book's enrichment; null when no book has that id. */
export async function getJob(ctx: QueueContext, id: string): Promise<EnrichmentView | null> {
  const [row] = await ctx.sql<
    {
      status: EnrichmentStatus | null;
      attempt_count: number;
      error: string | null;
      started_at: Date | null;
      finished_at: Date | null;
      attempts: unknown[];
      metadata: Metadata | null;
    }[]
  >`
    select metadata_enrichment_status as status, metadata_enrichment_attempt_count as attempt_count,
           metadata_enrichment_error as error, metadata_enrichment_started_at as started_at,
           metadata_enrichment_finished_at as finished_at,
           metadata_enrichment_attempts as attempts, metadata
    from user_books where id = ${id}`;
  if (!row) return null;
  const { metadata, ...status } = row;
  return {
    ...status,
    language: null,
    word_count: null,
    reading_time_minutes: null,
    summary: null,
    ...metadata,
  };
}

/**
 * Admin retry: `Failed` → `Pending`, attempts reset, error cleared (ADR-022: only an admin retry
 * brings a Failed job back), and a new intent: the requests' Idempotency-Key changes, so a
 * provider that stored the failed attempt's answer does not replay it. The commit NOTIFYs the
 * consumer.
 *
 * @returns the book's enrichment after the retry, or null when it is not `Failed` (or the book
 *   does not exist): nothing changes then.
 */
export async function retry(ctx: QueueContext, id: string): Promise<EnrichmentView | null> {
  const rows = await ctx.sql`
    update user_books
    set metadata_enrichment_status = 'Pending', metadata_enrichment_attempt_count = 0,
        metadata_enrichment_error = null, metadata_enrichment_claimed_by = null,
        metadata_enrichment_started_at = null, metadata_enrichment_finished_at = null,
        metadata_enrichment_intent = gen_random_uuid(), metadata_enrichment_run_after = null,
        updated_at = now()
    where id = ${id} and metadata_enrichment_status = 'Failed'`;
  if (rows.count === 0) return null;
  ctx.events.publish({ queue: name, id, transition: "retried", status: "Pending", attempt: 0 });
  return await getJob(ctx, id);
}

/**
 * When the next `Pending` book that is waiting out a provider's `Retry-After` becomes due, so the
 * idle consumer wakes for it.
 *
 * @returns ms from now (database clock), or null when no book waits.
 */
export async function nextDueMs(ctx: EnrichmentContext): Promise<number | null> {
  const [row] = await ctx.sql<{ ms: number | null }[]>`
    select (extract(epoch from min(metadata_enrichment_run_after) - now()) * 1000)::float8 as ms
    from user_books
    where metadata_enrichment_status = 'Pending'
      and metadata_enrichment_attempt_count < ${MAX_ATTEMPTS}
      and metadata_enrichment_run_after > now()`;
  return row.ms;
}

/**
 * Claim the oldest `Pending` book: one atomic conditional UPDATE `Pending` → `Running` (ADR-022
 * row 3), the scalar `id = (select … for update skip locked limit 1)` taking exactly one row
 * (docs/development.md). Counts the attempt and stamps this boot's id.
 *
 * @param lockHeld the queue lock's claim fence (lib/lock.ts): without the lock, nothing is claimed.
 *   Omitted only by tests that call the verb directly.
 * @returns the claimed book, or null when none is Pending.
 */
export async function claim(
  ctx: EnrichmentContext,
  lockHeld?: Fragment,
): Promise<EnrichmentJob | null> {
  const [row] = await ctx.sql<(EnrichmentJob & { runnable_for_s: number | null })[]>`
    update user_books
    set metadata_enrichment_status = 'Running',
        metadata_enrichment_attempt_count = metadata_enrichment_attempt_count + 1,
        metadata_enrichment_claimed_by = ${ctx.bootId},
        metadata_enrichment_started_at = now(), updated_at = now()
    where id = (
      select id from user_books
      where ${lockHeld ?? ctx.sql`true`} and metadata_enrichment_status = 'Pending'
        and metadata_enrichment_attempt_count < ${MAX_ATTEMPTS}
        and (metadata_enrichment_run_after is null or metadata_enrichment_run_after <= now())
      order by id
      for update skip locked
      limit 1
    )
    returning id, metadata_enrichment_attempt_count as attempt_count,
              metadata_enrichment_claimed_by as claimed_by,
              metadata_enrichment_intent as intent, title, author, (
                -- The wake latency: a subquery in RETURNING reads the statement's
                -- snapshot, so it sees the row as it was before this claim: Pending since its
                -- last write (the completing ingestion, a give-back, a retry, a recovery).
                select extract(epoch from now() - o.updated_at)::float8
                from user_books o
                where o.id = user_books.id and o.metadata_enrichment_status = 'Pending'
              ) as runnable_for_s`;
  return claimed(ctx, name, "Running", row);
}

/**
 * Give a claimed book back on shutdown: `Pending`, the attempt un-counted, no error (ADR-022 row
 * 3, "same cancellation catch → Pending"). Fenced on the claim.
 *
 * @returns false when the fence matched no row.
 */
export async function giveBack(ctx: EnrichmentContext, job: EnrichmentJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Pending',
          metadata_enrichment_attempt_count = metadata_enrichment_attempt_count - 1,
          metadata_enrichment_error = null, metadata_enrichment_started_at = null`,
    { transition: "given_back", status: "Pending", attempt: job.attempt_count - 1 },
  );
}

/**
 * Settle a run an admin cancelled, once it has stopped: `Failed` with {@linkcode CANCELLED}.
 * Fenced on the claim.
 *
 * @returns false when the fence matched no row.
 */
export async function cancelRun(ctx: EnrichmentContext, job: EnrichmentJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Failed', metadata_enrichment_error = ${CANCELLED},
          metadata_enrichment_finished_at = now()`,
    { transition: "cancelled", status: "Failed", attempt: job.attempt_count, error: CANCELLED },
  );
}

/**
 * Enrich one book: the local metadata from its chapters, then, when the remote engine is on, the
 * provider's answer (_remote.ts: its retries and waits happen inside this run); then `Completed`
 * with the metadata in one fenced write. The local metadata is saved whatever the provider does:
 * with the `Failed` or `Pending` write of a provider fault too (`engine: "local"`).
 *
 * @param signal aborted on shutdown or a lost lock (the run rejects with its reason and saves
 *   nothing, also during a provider's `Retry-After` wait; the consumer gives the claim back), or
 *   on the run timeout (retried under the cap).
 * @throws the signal's reason when aborted for shutdown or a lost lock.
 */
export async function run(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  signal: AbortSignal,
): Promise<void> {
  let local: Metadata | undefined;
  try {
    const metadata = await enrich(ctx, job, signal, (computed) => local = computed);
    signal.throwIfAborted();
    const completed = await settle(
      ctx,
      job,
      (sql) =>
        sql`metadata_enrichment_status = 'Completed', metadata = ${sql.json(metadata)},
            metadata_enrichment_error = null, metadata_enrichment_finished_at = now()`,
      { transition: "completed", status: "Completed", attempt: job.attempt_count },
    );
    if (completed) ctx.log.info({ queue: name, id: job.id, engine: metadata.engine }, "enriched");
  } catch (err) {
    if (runFault(ctx, name, job.id, err, signal) === "timeout") {
      return await retryLater(ctx, job, signal.reason, local);
    }
    // Only the remote engine has permanent faults (a malformed answer, an HTTP 4xx).
    const remote = ctx.remote ? await import("./_remote.ts") : null;
    if (remote?.isPermanent(err)) return await fail(ctx, job, (err as Error).message, local);
    const waitMs = remote && err instanceof remote.WaitTooLongError ? err.waitMs : null;
    return await retryLater(ctx, job, err, local, waitMs);
  }
}

type TxFragment = ReturnType<TxSql>;

// Every write that settles a claimed book goes through here. It matches the row as this run
// claimed it (Running, this attempt, this boot); 0 rows means the claim was lost: log it, change
// nothing (docs/development.md). The event is published only once the write has committed.
async function settle(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  changes: (sql: TxSql) => TxFragment,
  event: Pick<JobEvent, "transition" | "status" | "attempt" | "error">,
): Promise<boolean> {
  return await settleClaim(ctx, name, job.id, event, async (sql) =>
    (await sql`
      update user_books
      set ${changes(sql)}, metadata_enrichment_claimed_by = null, updated_at = now()
      where id = ${job.id} and metadata_enrichment_status = 'Running'
        and metadata_enrichment_attempt_count = ${job.attempt_count}
        and metadata_enrichment_claimed_by = ${job.claimed_by}`).count);
}

// The local metadata, when the run computed it, is saved with a fault's write (null keeps what the
// row holds).
async function fail(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  why: string,
  local?: Metadata,
): Promise<void> {
  const reason = jobError(why);
  const failed = await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Failed', metadata_enrichment_error = ${reason},
          metadata = coalesce(${local ? sql.json(local) : null}::jsonb, metadata),
          metadata_enrichment_finished_at = now()`,
    { transition: "failed", status: "Failed", attempt: job.attempt_count, error: reason },
  );
  if (failed) ctx.log.warn({ queue: name, id: job.id, reason }, "enrichment failed");
}

// A transient fault (network, 5xx, 429, a timeout, a wait asked beyond the bound): Pending again
// with the attempt spent while under the cap — due again once `waitMs` (the provider's asked wait)
// has passed — then Failed with the last fault as the reason.
async function retryLater(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  err: unknown,
  local?: Metadata,
  waitMs: number | null = null,
): Promise<void> {
  const detail = jobError(err instanceof Error ? err.message : String(err));
  await retryUnderCap(job, MAX_ATTEMPTS, detail, {
    fail: (reason) => fail(ctx, job, reason, local),
    retry: async (reason) => {
      const pending = await settle(
        ctx,
        job,
        (sql) =>
          sql`metadata_enrichment_status = 'Pending', metadata_enrichment_error = ${reason},
              metadata = coalesce(${local ? sql.json(local) : null}::jsonb, metadata),
              metadata_enrichment_run_after = ${
            waitMs === null ? null : sql`now() + ${waitMs} * interval '1 millisecond'`
          },
              metadata_enrichment_started_at = null`,
        { transition: "failed", status: "Pending", attempt: job.attempt_count, error: reason },
      );
      if (pending) {
        ctx.log.warn({ queue: name, id: job.id, err: detail }, "enrichment will be retried");
      }
    },
  });
}
