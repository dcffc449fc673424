/**
 * The smallest complete queue: table `noop_jobs` (examples/noop/table.sql), whose jobs do nothing.
 * It is the example queues/README.md points to, kept out of `queues/` and of main.ts's list so it
 * never runs in production: tests/process/new_queue_test.ts adds it to a scratch copy of the
 * repository as a new queue would be added, and the bench drains it with the real consumer to
 * measure the runtime's own cost per job.
 *
 * - Queued → Processing: {@linkcode claim} (counts the attempt, stamps `claimed_by`), or the
 *   chained claim of {@linkcode run}.
 * - Processing → Completed: {@linkcode run}, one fenced statement that also claims the next job
 *   when the consumer allows it (`claimNext`): one statement and one commit per job.
 * - Processing → Queued: {@linkcode giveBack} on shutdown (attempt not counted).
 * - Processing → Queued: {@linkcode recoverOrphans} when the consumer takes the lock (every row
 *   in flight is orphaned; a no-op job is safe to run again, so its attempt is given back too).
 *
 * No stale rule: {@linkcode recover} does nothing, on the poll tick (`recoverOn`), which is what
 * lets the consumer chain claims. No attempts cap: a no-op job cannot fail.
 *
 * @module
 */
import type { QueueDefaults } from "../../lib/config.ts";
import type {
  ClaimedJob,
  ClaimNext,
  OrphanScope,
  QueueContext,
  RecoverOn,
} from "../../lib/queue.ts";
import type { Fragment, Sql } from "../../lib/db.ts";

export const name = "noop";
export const table = "noop_jobs";
export const defaults: QueueDefaults = {
  envPrefix: "NOOP",
  staleAfterMs: 600_000,
  timeoutMs: 60_000,
};
export const recoverOn: RecoverOn = "poll";

/** The queue's context: the shared one, and what an observer (the bench) sees of the drain. */
export interface NoopContext extends QueueContext {
  /** Called with every claim's result (null: the queue was empty). */
  onClaim?(job: NoopJob | null): void;
  /** Called as a claim of its own (not a chained one) is handed to the driver. */
  onClaimSent?(): void;
  /** Called once a job's fenced completion has committed; `settled` false when the fence missed. */
  onComplete?(job: NoopJob, settled: boolean): void;
}

/** A claimed no-op job, as the claim wrote it (the fence). */
export interface NoopJob extends ClaimedJob {
  readonly claimed_by: string;
}

/** The queue's migration: what `sql/NNN_noop.sql` holds once the queue is added. */
const TABLE_SQL = new URL("./table.sql", import.meta.url);

/**
 * Create the queue's table, claim index and NOTIFY triggers in the current schema, which must
 * already hold `notify_queue()` and `notify_queue_row()` (the migrations in `sql/`): the bench's
 * way to add the queue without a migration of its own.
 *
 * @param sql a client whose `search_path` starts with the schema.
 */
export async function createTable(sql: Sql): Promise<void> {
  // DDL from the repository's own file, no values: nothing to bind.
  await sql.unsafe(await Deno.readTextFile(TABLE_SQL));
}

/** Nothing to recover: see the module comment. */
export function recover(_ctx: NoopContext, _signal: AbortSignal): Promise<void> {
  return Promise.resolve();
}

/**
 * Give back every row in flight when the consumer takes the lock (scope `"all"`: the lock proves
 * their consumer gone), or only this boot's (scope `"own"`): `Queued`, the attempt not counted.
 */
export async function recoverOrphans(
  ctx: NoopContext,
  _signal: AbortSignal,
  scope: OrphanScope = "all",
): Promise<void> {
  await ctx.sql`
    update noop_jobs
    set status = 'Queued', attempt_count = attempt_count - 1, claimed_by = null, claimed_at = null
    where status = 'Processing'
      ${scope === "own" ? ctx.sql`and claimed_by = ${ctx.bootId}` : ctx.sql``}`;
}

/**
 * Claim the oldest `Queued` job: the scalar `id = (select … for update skip locked limit 1)`
 * (docs/development.md, SQL), counting the attempt and stamping this boot's id. `claimed_at` is
 * `clock_timestamp()`, the moment of the claim, for the wake latency.
 *
 * @returns the claimed job, or null when nothing is queued.
 */
export async function claim(ctx: NoopContext, lockHeld?: Fragment): Promise<NoopJob | null> {
  ctx.onClaimSent?.();
  const [job] = await ctx.sql<NoopJob[]>`${claimStatement(ctx, lockHeld ?? ctx.sql`true`)}`;
  ctx.onClaim?.(job ?? null);
  return job ?? null;
}

function claimStatement(ctx: NoopContext, where: Fragment): Fragment {
  return ctx.sql`
    update noop_jobs
    set status = 'Processing', attempt_count = attempt_count + 1, claimed_by = ${ctx.bootId},
        claimed_at = clock_timestamp()
    where id = (
      select id from noop_jobs
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
      update noop_jobs
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
  ctx.onComplete?.(job, row.done);
  if (!fence) return;
  const next = row.id === null
    ? null
    : { id: row.id, attempt_count: row.attempt_count!, claimed_by: row.claimed_by! };
  ctx.onClaim?.(next);
  return next;
}

/**
 * Give a claimed job back on shutdown: `Queued`, the attempt un-counted; fenced.
 *
 * @returns false when the fence matched no row.
 */
export async function giveBack(ctx: NoopContext, job: NoopJob): Promise<boolean> {
  const rows = await ctx.sql`
    update noop_jobs
    set status = 'Queued', attempt_count = attempt_count - 1, claimed_by = null, claimed_at = null
    where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
      and claimed_by = ${job.claimed_by}`;
  return rows.count === 1;
}
