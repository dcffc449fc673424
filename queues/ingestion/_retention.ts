/**
 * The ingestion queue's retention: finished jobs deleted once `INGESTION_RETENTION_DAYS` have
 * passed ({@linkcode prune}, on the poll tick). mod.ts exports it as the queue's verb.
 *
 * @module
 */
import type { IngestionContext } from "./mod.ts";
import { name } from "./_constants.ts";

/** Finished jobs deleted per statement by {@linkcode prune}. */
export const PRUNE_BATCH = 500;
/** Longest one poll tick spends pruning, in ms; the rest waits for the next tick. */
export const PRUNE_BUDGET_MS = 250;

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
