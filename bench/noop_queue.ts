/**
 * The bench's no-op queue (issue 11): table `bench_noop_jobs` (created by {@linkcode createTable}
 * in the bench's schema), drained by the real consumer so the runtime's own per-job cost is
 * measured apart from any work. Same `Queue` contract as `queues/`:
 *
 * - Queued → Processing: {@linkcode claim} (counts the attempt, stamps `claimed_by`).
 * - Processing → Completed: {@linkcode run}, one fenced UPDATE and nothing else.
 * - Processing → Queued: {@linkcode giveBack} on shutdown (attempt un-counted).
 *
 * No stale rule and no recovery: the bench never crashes a consumer, so {@linkcode recover} does
 * nothing (what a queue's sweep costs is the queue's own figure, not the runtime's).
 *
 * @module
 */
import type { QueueDefaults } from "../lib/config.ts";
import type { ClaimedJob, QueueContext } from "../lib/consumer.ts";
import type { Sql } from "../lib/db.ts";

export const name = "bench_noop";
export const table = "bench_noop_jobs";
export const defaults: QueueDefaults = {
  envPrefix: "BENCH_NOOP",
  staleAfterMs: 600_000,
  timeoutMs: 60_000,
};

/** The bench's context: what it observes of the drain, in process. */
export interface NoopContext extends QueueContext {
  /** Called with every claim's result (null: the queue was empty). */
  onClaim(job: NoopJob | null): void;
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
  for (const event of ["insert", "update"]) {
    await sql`
      create trigger ${sql(`bench_noop_jobs_notify_${event}`)}
      after ${sql.unsafe(event)} on bench_noop_jobs
      referencing new table as new_rows
      for each statement execute function notify_queue()`;
  }
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
export async function claim(ctx: NoopContext): Promise<NoopJob | null> {
  const [job] = await ctx.sql<NoopJob[]>`
    update bench_noop_jobs
    set status = 'Processing', attempt_count = attempt_count + 1, claimed_by = ${ctx.bootId},
        claimed_at = clock_timestamp()
    where id = (
      select id from bench_noop_jobs
      where status = 'Queued'
      order by id
      for update skip locked
      limit 1
    )
    returning id, attempt_count, claimed_by`;
  ctx.onClaim(job ?? null);
  return job ?? null;
}

/**
 * Complete the job: one UPDATE fenced on the row as this run claimed it, no work before it.
 * A fence that matches nothing is logged, never fixed.
 *
 * @throws the signal's reason when aborted before the write.
 */
export async function run(ctx: NoopContext, job: NoopJob, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  const rows = await ctx.sql`
    update bench_noop_jobs
    set status = 'Completed', claimed_by = null, finished_at = clock_timestamp()
    where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
      and claimed_by = ${job.claimed_by}`;
  if (rows.count === 0) {
    ctx.log.warn({ queue: name, id: job.id }, "completion matched no row: the claim was lost");
  }
  ctx.onComplete(job, rows.count === 1);
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
