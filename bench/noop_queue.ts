/**
 * The bench's no-op queue (issue 11): table `bench_noop_jobs` (created by {@linkcode createTable}
 * in the bench's schema), drained by the real consumer so the runtime's own per-job cost is
 * measured apart from any work. Same `Queue` contract as `queues/`:
 *
 * - Queued → Processing: {@linkcode claim} (counts the attempt, stamps `claimed_by`), or the
 *   chained claim of {@linkcode run}.
 * - Processing → Completed: {@linkcode run}, one fenced statement that also claims the next job
 *   when the consumer allows it (`claimNext`): one statement and one commit per job (issue 11).
 * - Processing → Queued: {@linkcode giveBack} on shutdown (attempt un-counted).
 *
 * No stale rule and no recovery: the bench never crashes a consumer, so {@linkcode recover} does
 * nothing (what a queue's sweep costs is the queue's own figure, not the runtime's); it runs on the
 * poll tick (`recoverOn`), which is what lets the consumer chain claims.
 *
 * @module
 */
import type { QueueDefaults } from "../lib/config.ts";
import type { ClaimedJob, ClaimNext, QueueContext, RecoverOn } from "../lib/queue.ts";
import type { Fragment, Sql } from "../lib/db.ts";

export const name = "bench_noop";
export const table = "bench_noop_jobs";
export const defaults: QueueDefaults = {
  envPrefix: "BENCH_NOOP",
  staleAfterMs: 600_000,
  timeoutMs: 60_000,
};
export const recoverOn: RecoverOn = "poll";

/** The bench's context: what it observes of the drain, in process. */
export interface NoopContext extends QueueContext {
  /** Called with every claim's result (null: the queue was empty). */
  onClaim(job: NoopJob | null): void;
  /** Called as a claim of its own (not a chained one) is handed to the driver. */
  onClaimSent?(): void;
  /** Called once a job's fenced completion has committed; `settled` false when the fence missed. */
  onComplete(job: NoopJob, settled: boolean): void;
}

/** A claimed no-op job, as the claim wrote it (the fence). */
export interface NoopJob extends ClaimedJob {
  readonly claimed_by: string;
}

/**
 * Create the queue's table, claim index and NOTIFY triggers in the current schema, which must
 * already hold `notify_queue()` (sql/002_queue_common.sql). `enqueued_xid` lets the bench read
 * the inserting transaction's commit time (`track_commit_timestamp`) for the wake latency.
 *
 * @param sql a client whose `search_path` starts with the bench's schema.
 */
export async function createTable(sql: Sql): Promise<void> {
  await sql`
    create table bench_noop_jobs (
      id bigint generated always as identity primary key,
      status text not null default 'Queued'
        check (status in ('Queued', 'Processing', 'Completed', 'Failed')),
      attempt_count integer not null default 0,
      claimed_by uuid,
      claimed_at timestamptz,
      finished_at timestamptz,
      enqueued_xid xid8 not null default pg_current_xact_id(),
      created_at timestamptz not null default clock_timestamp()
    )`;
  await sql`
    create index bench_noop_jobs_claimable on bench_noop_jobs (id)
    where status in ('Queued', 'Processing')`;
  // The triggers of the real queues (sql/002 for inserts, sql/009 for updates).
  await sql`
    create trigger bench_noop_jobs_notify_insert
    after insert on bench_noop_jobs
    referencing new table as new_rows
    for each statement execute function notify_queue()`;
  await sql`
    create trigger bench_noop_jobs_notify_update
    after update on bench_noop_jobs
    for each row when (new.status = 'Queued')
    execute function notify_queue_row()`;
}

/** Nothing to recover: see the module comment. */
export function recover(_ctx: NoopContext, _signal: AbortSignal): Promise<void> {
  return Promise.resolve();
}

/** Nothing is orphaned: the bench's table is new and only this consumer claims from it. */
export function recoverOrphans(_ctx: NoopContext, _signal: AbortSignal): Promise<void> {
  return Promise.resolve();
}

/**
 * Claim the oldest `Queued` job: the scalar `id = (select … for update skip locked limit 1)`
 * (STYLE.md §3), counting the attempt and stamping this boot's id. `claimed_at` is
 * `clock_timestamp()`, the moment of the claim, for the wake latency.
 *
 * @returns the claimed job, or null when nothing is queued.
 */
export async function claim(ctx: NoopContext, lockHeld?: Fragment): Promise<NoopJob | null> {
  ctx.onClaimSent?.();
  const [job] = await ctx.sql<NoopJob[]>`${claimStatement(ctx, lockHeld ?? ctx.sql`true`)}`;
  ctx.onClaim(job ?? null);
  return job ?? null;
}

function claimStatement(ctx: NoopContext, where: Fragment): Fragment {
  return ctx.sql`
    update bench_noop_jobs
    set status = 'Processing', attempt_count = attempt_count + 1, claimed_by = ${ctx.bootId},
        claimed_at = clock_timestamp()
    where id = (
      select id from bench_noop_jobs
      where ${where} and status = 'Queued'
      order by id
      for update skip locked
      limit 1
    )
    returning id, attempt_count, claimed_by`;
}

/**
 * Complete the job: one statement fenced on the row as this run claimed it, no work before it;
 * with `claimNext`, the same statement claims the next job once the fence matched. A fence that
 * matches nothing is logged, never fixed.
 *
 * @returns the chained job (null: none queued), or nothing when not chaining.
 * @throws the signal's reason when aborted before the write.
 */
export async function run(
  ctx: NoopContext,
  job: NoopJob,
  signal: AbortSignal,
  claimNext?: ClaimNext,
): Promise<NoopJob | null | void> {
  signal.throwIfAborted();
  const fence = claimNext?.(ctx.sql) ?? null;
  const chained = fence ? ctx.sql`${fence} and exists (select from done)` : ctx.sql`false`;
  const [row] = await ctx.sql<
    { done: boolean; id: string | null; attempt_count: number | null; claimed_by: string | null }[]
  >`
    with done as (
      update bench_noop_jobs
      set status = 'Completed', claimed_by = null, finished_at = clock_timestamp()
      where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}
      returning id
    ),
    next as (${claimStatement(ctx, chained)})
    select exists (select from done) as done, next.id, next.attempt_count, next.claimed_by
    from (select) as one left join next on true`;
  if (!row.done) {
    ctx.log.warn({ queue: name, id: job.id }, "completion matched no row: the claim was lost");
  }
  ctx.onComplete(job, row.done);
  if (!fence) return;
  const next = row.id === null
    ? null
    : { id: row.id, attempt_count: row.attempt_count!, claimed_by: row.claimed_by! };
  ctx.onClaim(next);
  return next;
}

/**
 * Give a claimed job back on shutdown: `Queued`, the attempt un-counted; fenced.
 *
 * @returns false when the fence matched no row.
 */
export async function giveBack(ctx: NoopContext, job: NoopJob): Promise<boolean> {
  const rows = await ctx.sql`
    update bench_noop_jobs
    set status = 'Queued', attempt_count = attempt_count - 1, claimed_by = null, claimed_at = null
    where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
      and claimed_by = ${job.claimed_by}`;
  return rows.count === 1;
}
