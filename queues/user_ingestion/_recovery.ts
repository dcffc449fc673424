/**
 * The user ingestion queue's recovery: the stale rule at the attempts cap ({@linkcode recover},
 * on every wake) and the crash rule for every row still in flight when the consumer takes the
 * lock ({@linkcode recoverOrphans}); a job failed so fails its user book with
 * `INTERRUPTED_MESSAGE` in the same statement. mod.ts exports them as the queue's verbs.
 *
 * @module
 */
import { transaction } from "../../lib/db.ts";
import { type OrphanScope } from "../../lib/queue.ts";
import { publishRecovered } from "../../lib/queue_flow.ts";
import type { UserIngestionContext } from "./mod.ts";
import { INTERRUPTED_MESSAGE, MAX_ATTEMPTS, name } from "./_constants.ts";

/**
 * Fail stale rows at the attempts cap, and their user books with {@linkcode INTERRUPTED_MESSAGE}
 * (the crashes were not the file's fault). One statement; below the cap a stale row is left to
 * {@linkcode claim}. Runs on every wake.
 */
export async function recover(ctx: UserIngestionContext, _signal: AbortSignal): Promise<void> {
  const rows = await ctx.sql<{ id: string; attempt_count: number }[]>`
    with failed as (
      update user_ingestion_jobs
      set status = 'Failed', claimed_by = null, finished_at = now(), updated_at = now(),
          error = 'interrupted: attempts exhausted (' || attempt_count || ' of '
                  || ${MAX_ATTEMPTS}::int || '); the last run stopped without finishing'
      where status = 'Processing'
        and claimed_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
        and attempt_count >= ${MAX_ATTEMPTS}
      returning id, user_book_id, attempt_count
    ), books as (
      update user_books set status = 'Failed', error = ${INTERRUPTED_MESSAGE}, updated_at = now()
      where id in (select user_book_id from failed) and status = 'Processing'
    )
    select id, attempt_count from failed`;
  publishRecovered(ctx, name, rows, "Failed", "stale job failed at the attempts cap");
}

/**
 * Orphan recovery, run once each time the consumer takes the queue lock: with the lock held,
 * nothing of this queue can be in flight, so every `Processing` row is orphaned (ADR-022: "in
 * flight at my startup" already means orphaned). A row claimed by this same boot (a lost lock
 * whose give-back did not land) is given back, its attempt not counted. A row claimed by another
 * boot follows the crash rule: its attempt is spent; `Queued` under the cap, else `Failed`, its
 * book with {@linkcode INTERRUPTED_MESSAGE}. One transaction.
 */
export async function recoverOrphans(
  ctx: UserIngestionContext,
  _signal: AbortSignal,
  scope: OrphanScope = "all",
): Promise<void> {
  const recovered = await transaction(ctx.sql, ctx.log, async (tx) => {
    const givenBack = await tx.sql<{ id: string; attempt_count: number }[]>`
      update user_ingestion_jobs
      set status = 'Queued', attempt_count = attempt_count - 1, error = null, claimed_by = null,
          claimed_at = null, updated_at = now()
      where status = 'Processing' and claimed_by = ${ctx.bootId}
      returning id, attempt_count`;
    // Scope "own" (a claim whose reply was lost): another boot's row may be a standby's live claim.
    if (scope === "own") return { givenBack, requeued: [], failed: [] };
    const requeued = await tx.sql<{ id: string; attempt_count: number }[]>`
      update user_ingestion_jobs
      set status = 'Queued', claimed_by = null, claimed_at = null, run_after = now(),
          updated_at = now(),
          error = 'interrupted: attempt ' || attempt_count || ' of ' || ${MAX_ATTEMPTS}::int
                  || ' stopped without finishing (consumer restarted); will retry'
      where status = 'Processing' and claimed_by is distinct from ${ctx.bootId}
        and attempt_count < ${MAX_ATTEMPTS}
      returning id, attempt_count`;
    const failed = await tx.sql<{ id: string; attempt_count: number }[]>`
      with failed as (
        update user_ingestion_jobs
        set status = 'Failed', claimed_by = null, finished_at = now(), updated_at = now(),
            error = 'interrupted: attempts exhausted (' || attempt_count || ' of '
                    || ${MAX_ATTEMPTS}::int || '); the last run stopped without finishing'
        where status = 'Processing' and claimed_by is distinct from ${ctx.bootId}
          and attempt_count >= ${MAX_ATTEMPTS}
        returning id, user_book_id, attempt_count
      ), books as (
        update user_books set status = 'Failed', error = ${INTERRUPTED_MESSAGE}, updated_at = now()
        where id in (select user_book_id from failed) and status = 'Processing'
      )
      select id, attempt_count from failed`;
    return { givenBack, requeued, failed };
  });
  for (const row of recovered.givenBack) {
    ctx.log.info({ queue: name, id: row.id }, "orphaned job of this boot given back");
    ctx.events.publish({
      queue: name,
      id: row.id,
      transition: "given_back",
      status: "Queued",
      attempt: row.attempt_count,
    });
  }
  publishRecovered(ctx, name, recovered.requeued, "Queued", "orphaned job requeued, attempt spent");
  publishRecovered(
    ctx,
    name,
    recovered.failed,
    "Failed",
    "orphaned job failed at the attempts cap",
  );
}
