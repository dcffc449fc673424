/**
 * The static-site rebuild queue: table `ssg_rebuild_jobs` (sql/003_ssg.sql). Only `Full` jobs
 * (ADR-022 row 4, as shipped 2026-10-08; ADR-023 removed per-edit jobs).
 *
 * Transitions:
 * - (none) → Queued: {@linkcode queueRebuild} (admin `rebuild-all`, {@linkcode publishEdition}). At most one
 *   `Queued` Full job exists (partial unique index); a request while one is queued reuses it.
 *
 * @module
 */
import type { Sql, TxSql } from "../lib/db.ts";

/** Statuses of `ssg_rebuild_jobs.status`. */
export type SsgStatus = "Queued" | "Running" | "Completed" | "Failed";

/** A job row as the API shows it. */
export interface SsgJobRow {
  /** bigint id, as a string. */
  id: string;
  kind: "Full";
  status: SsgStatus;
  attempt_count: number;
  error: string | null;
  claimed_by: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Make sure a `Queued` Full rebuild exists, so whatever was just written (a publish) reaches the
 * site: a rebuild already `Running` may have read the editions before this write, so it does not
 * count; one already `Queued` will read them, so it is reused. Call it inside the transaction of
 * the write it follows, so the job and the write commit together; its commit NOTIFYs the consumer.
 *
 * @param sql the pool, or the transaction of the write that needs the rebuild.
 * @returns the `Queued` job and whether this call created it.
 * @throws Error when no queued job could be found or made after three tries (only under a storm
 *   of concurrent claims; the caller's transaction then rolls back).
 */
export async function queueRebuild(
  sql: Sql | TxSql,
): Promise<{ job: SsgJobRow; created: boolean }> {
  for (let i = 0; i < 3; i++) {
    // ON CONFLICT on the partial unique index: one Queued Full job at a time, without a race
    // between "is there one?" and "insert one".
    const [created] = await sql<SsgJobRow[]>`
      insert into ssg_rebuild_jobs (kind) values ('Full')
      on conflict (kind) where status = 'Queued' do nothing
      returning *`;
    if (created) return { job: created, created: true };
    const [queued] = await sql<SsgJobRow[]>`
      select * from ssg_rebuild_jobs where kind = 'Full' and status = 'Queued'`;
    // Claimed between the two statements: it may have missed our write, so queue another.
    if (queued) return { job: queued, created: false };
  }
  throw new Error("Cannot queue a Full rebuild: the queued job kept being claimed");
}

/**
 * Publish or unpublish an edition, and queue the Full rebuild that puts the change on the site —
 * the one write the admin publish route and auto-publish's complete both use. Call it inside
 * the caller's transaction so the edition, the rebuild and the caller's own settle commit together.
 *
 * @param tx the caller's transaction.
 * @param editionId bigint id, as a string.
 * @param published true to publish (keeps the first `published_at`), false to unpublish.
 * @returns the edition's `published_at` after the write and the queued rebuild; null when no
 *   edition has that id (nothing is written then).
 */
export async function publishEdition(
  tx: TxSql,
  editionId: string,
  published: boolean,
): Promise<{ published_at: Date | null; rebuild: SsgJobRow } | null> {
  const [edition] = await tx<{ published_at: Date | null }[]>`
    update editions
    set published_at = case when ${published} then coalesce(published_at, now()) end,
        updated_at = now()
    where id = ${editionId}
    returning published_at`;
  if (!edition) return null;
  const { job } = await queueRebuild(tx);
  return { published_at: edition.published_at, rebuild: job };
}
