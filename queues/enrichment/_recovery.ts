/**
 * The enrichment queue's recovery: the stale rule ({@linkcode recover}, on every wake: `Pending`
 * with the attempt spent, `Failed` at the cap) and the crash rule for every book still `Running`
 * when the consumer takes the lock ({@linkcode recoverOrphans}). mod.ts exports them as the
 * queue's verbs.
 *
 * @module
 */
import { transaction } from "../../lib/db.ts";
import type { OrphanScope } from "../../lib/queue.ts";
import type { EnrichmentContext, EnrichmentStatus } from "./mod.ts";
import { MAX_ATTEMPTS, name } from "./_constants.ts";

/**
 * Stale recovery, on every wake: `Running` started more than `staleAfterMs` ago → `Pending` with
 * the attempt spent, or `Failed` at the cap (ADR-022 row 3; the cap is this queue's own, beyond the ADR). One statement.
 */
export async function recover(ctx: EnrichmentContext, _signal: AbortSignal): Promise<void> {
  const rows = await ctx.sql<{ id: string; status: EnrichmentStatus; attempt_count: number }[]>`
    update user_books
    set metadata_enrichment_status = case when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS}
          then 'Failed' else 'Pending' end,
        metadata_enrichment_error = 'interrupted: attempt ' || metadata_enrichment_attempt_count
          || ' of ' || ${MAX_ATTEMPTS}::int || ' was stale (Running too long)',
        metadata_enrichment_finished_at = case
          when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS} then now() end,
        metadata_enrichment_claimed_by = null, updated_at = now()
    where metadata_enrichment_status = 'Running'
      and metadata_enrichment_started_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
    returning id, metadata_enrichment_status as status,
              metadata_enrichment_attempt_count as attempt_count`;
  for (const row of rows) {
    ctx.log.warn({ queue: name, id: row.id, status: row.status }, "stale enrichment recovered");
    ctx.events.publish({
      queue: name,
      id: row.id,
      transition: "recovered",
      status: row.status,
      attempt: row.attempt_count,
    });
  }
}

/**
 * Orphan recovery, once each time the consumer takes the queue lock: every `Running` row is
 * orphaned then. One claimed by this same boot (a lost lock whose give-back did not land) is given
 * back, attempt not counted; one claimed by another boot follows the crash rule: `Pending` with the
 * attempt spent, `Failed` at the cap. One transaction.
 */
export async function recoverOrphans(
  ctx: EnrichmentContext,
  _signal: AbortSignal,
  scope: OrphanScope = "all",
): Promise<void> {
  type Row = { id: string; status: EnrichmentStatus; attempt_count: number };
  const { givenBack, crashed } = await transaction(ctx.sql, ctx.log, async (tx) => {
    const givenBack = await tx.sql<Row[]>`
      update user_books
      set metadata_enrichment_status = 'Pending',
          metadata_enrichment_attempt_count = metadata_enrichment_attempt_count - 1,
          metadata_enrichment_error = null, metadata_enrichment_claimed_by = null,
          metadata_enrichment_started_at = null, updated_at = now()
      where metadata_enrichment_status = 'Running'
        and metadata_enrichment_claimed_by = ${ctx.bootId}
      returning id, metadata_enrichment_status as status,
                metadata_enrichment_attempt_count as attempt_count`;
    // Scope "own" (a claim whose reply was lost): another boot's row may be a standby's live claim.
    if (scope === "own") return { givenBack, crashed: [] };
    const crashed = await tx.sql<Row[]>`
      update user_books
      set metadata_enrichment_status = case
            when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS} then 'Failed' else 'Pending' end,
          metadata_enrichment_error = 'interrupted: attempt ' || metadata_enrichment_attempt_count
            || ' of ' || ${MAX_ATTEMPTS}::int || ' stopped without finishing (consumer restarted)',
          metadata_enrichment_finished_at = case
            when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS} then now() end,
          metadata_enrichment_claimed_by = null, updated_at = now()
      where metadata_enrichment_status = 'Running'
        and metadata_enrichment_claimed_by is distinct from ${ctx.bootId}
      returning id, metadata_enrichment_status as status,
                metadata_enrichment_attempt_count as attempt_count`;
    return { givenBack, crashed };
  });
  for (const row of givenBack) {
    ctx.log.info({ queue: name, id: row.id }, "orphaned enrichment of this boot given back");
    ctx.events.publish({ queue: name, id: row.id, transition: "given_back", ...pick(row) });
  }
  for (const row of crashed) {
    ctx.log.warn({ queue: name, id: row.id, status: row.status }, "orphaned enrichment recovered");
    ctx.events.publish({ queue: name, id: row.id, transition: "recovered", ...pick(row) });
  }
}

function pick(row: { status: EnrichmentStatus; attempt_count: number }) {
  return { status: row.status, attempt: row.attempt_count };
}
