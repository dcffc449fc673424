/**
 * The ingestion queue's recovery: the stale rule at the attempts cap and the repair of chapter
 * assets whose write was cut short ({@linkcode recover}, on the poll tick), the crash rule for
 * every row still in flight when the consumer takes the lock ({@linkcode recoverOrphans}), and
 * when the next delayed retry falls due ({@linkcode nextDueMs}). mod.ts exports them as the
 * queue's verbs.
 *
 * @module
 */
import type { OrphanScope } from "../../lib/queue.ts";
import { publishRecovered } from "../../lib/queue_flow.ts";
import { REPAIR_BUDGET_MS, repairAssets } from "./_assets.ts";
import type { IngestionContext, IngestionStatus } from "./mod.ts";
import { MAX_ATTEMPTS, name } from "./_constants.ts";

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
  publishRecovered(ctx, name, rows, "Failed", "stale job failed at the attempts cap");
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
