/**
 * What the API and the dashboard do to the site-rebuild queue's jobs, in the queue's own statements:
 * enqueue, read, list and search (keyset pages, newest first), cancel, admin retry (one job, or
 * every match of a filter in one statement) and the counts behind `/metrics` and `/admin`. The
 * consumer's verbs — claim, run, give back, recover — are mod.ts's.
 *
 * @module
 */
import { name, type SsgJobRow, type SsgListRow, type SsgStatus } from "./mod.ts";
import { type Sql, type TxSql } from "../../lib/db.ts";
import {
  BULK_RETRY_MAX,
  type BulkRetryOutcome,
  CANCELLED,
  type CancelOutcome,
  containing,
  type JobFilter,
  type JobListPage,
  type QueueContext,
  type QueueStats,
} from "../../lib/queue.ts";
import {
  bulkRetried,
  type BulkRetryRow,
  cancelJob,
  publishRetried,
  type QueueControl,
} from "../../lib/control.ts";
import { statsOf, type StatsRow } from "../../lib/admin/queue_view.ts";

/** The queue's statuses, in lifecycle order (its list's filter, its stats, its view). */
export const STATUSES = [
  "Queued",
  "Running",
  "Completed",
  "Failed",
] as const satisfies readonly SsgStatus[];

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
export async function enqueue(
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
  const { job } = await enqueue(tx);
  return { published_at: edition.published_at, rebuild: job };
}

/**
 * `POST /internal/ssg/rebuild-all`: the Full job already in flight, else a new `Queued` one. A
 * `Queued` job is preferred over a `Running` one (it will read everything published so far).
 *
 * @returns the job and whether this call created it.
 */
export async function requestRebuild(
  ctx: QueueContext,
): Promise<{ job: SsgJobRow; created: boolean }> {
  const [inFlight] = await ctx.sql<SsgJobRow[]>`
    select * from ssg_rebuild_jobs
    where kind = 'Full' and status in ('Queued', 'Running')
    order by status = 'Queued' desc, created_at
    limit 1`;
  if (inFlight) return { job: inFlight, created: false };
  return await enqueue(ctx.sql);
}

/** Read one job; null when no row has that id. */
export async function getJob(
  ctx: Pick<QueueContext, "sql">,
  id: string,
): Promise<SsgJobRow | null> {
  const [row] = await ctx.sql<SsgJobRow[]>`select * from ssg_rebuild_jobs where id = ${id}`;
  return row ?? null;
}

/**
 * Admin retry: `Failed` → `Queued`, attempts reset, error cleared (ADR-022: "Failed is terminal.
 * Only an admin retry brings it back").
 *
 * @returns the updated row, or null when the job is not `Failed`, does not exist, or another
 *   Full job is already `Queued` (it renders everything this one would); nothing changes then.
 */
export async function retry(ctx: QueueContext, id: string): Promise<SsgJobRow | null> {
  let row: SsgJobRow | undefined;
  try {
    [row] = await ctx.sql<SsgJobRow[]>`
      update ssg_rebuild_jobs
      set status = 'Queued', attempt_count = 0, error = null, claimed_by = null,
          started_at = null, finished_at = null, updated_at = now()
      where id = ${id} and status = 'Failed'
      returning *`;
  } catch (err) {
    // The one-Queued index: a Full job is already queued.
    if ((err as { code?: unknown }).code === "23505") return null;
    throw err;
  }
  if (row) publishRetried(ctx.events, name, id);
  return row ?? null;
}

// The filter of the list and the bulk retry: a status, and `q` in the subject or the error.
export function filtered(sql: Sql, filter: JobFilter) {
  return sql`
    ${filter.status ? sql`and status = ${filter.status}` : sql``}
    ${
    filter.q
      ? sql`and (kind || ' rebuild' ilike ${containing(filter.q)}
          or error ilike ${containing(filter.q)})`
      : sql``
  }`;
}

/** A page of jobs, newest first, keyset-paged on the primary key (no OFFSET, no count). */
export async function list(sql: Sql, page: JobListPage): Promise<SsgListRow[]> {
  return await sql<SsgListRow[]>`
    select *, kind || ' rebuild' as subject
    from ssg_rebuild_jobs
    where true ${filtered(sql, page)}
      ${page.beforeId ? sql`and id < ${page.beforeId}` : sql``}
    order by id desc
    limit ${page.limit}`;
}

/**
 * The admin cancel: a `Queued` rebuild → `Failed` with {@linkcode CANCELLED}; a `Running` one's
 * render is asked to stop and settled by {@linkcode cancelRun}. A retry brings it back.
 */
export async function cancel(
  ctx: QueueContext,
  id: string,
  control: Pick<QueueControl, "requestCancel">,
): Promise<CancelOutcome<SsgJobRow>> {
  return await cancelJob({
    queue: name,
    id,
    events: ctx.events,
    cancelRunnable: async () => {
      const [row] = await ctx.sql<SsgJobRow[]>`
        update ssg_rebuild_jobs
        set status = 'Failed', error = ${CANCELLED}, finished_at = now(), updated_at = now()
        where id = ${id} and status = 'Queued'
        returning *`;
      return row ?? null;
    },
    read: () => getJob(ctx, id),
    running: "Running",
    requestCancel: () => control.requestCancel(name, id),
  });
}

/**
 * The bulk admin retry under this queue's rule: at most one `Queued` Full rebuild exists, and it
 * renders everything, so only the newest matching `Failed` job is re-queued, and none while one
 * is `Queued`; the others stay `Failed` (`skipped`). One statement.
 *
 * @param dryRun count only: nothing changes.
 */
export async function bulkRetry(
  ctx: QueueContext,
  filter: JobFilter,
  dryRun: boolean,
): Promise<BulkRetryOutcome> {
  const only = filtered(ctx.sql, { ...filter, status: "Failed" });
  const [row] = await ctx.sql<BulkRetryRow[]>`
    with matched as (
      select count(*)::int as n from (
        select from ssg_rebuild_jobs where true ${only} limit ${BULK_RETRY_MAX + 1}) m
    ), retried as (
      update ssg_rebuild_jobs
      set status = 'Queued', attempt_count = 0, error = null, claimed_by = null,
          started_at = null, finished_at = null, updated_at = now()
      where id = (
        select id from ssg_rebuild_jobs
        where ${!dryRun} ${only}
          and not exists (select from ssg_rebuild_jobs where kind = 'Full' and status = 'Queued')
        order by id desc
        limit 1
        for update skip locked)
      returning id
    )
    select (select n from matched) as matched,
           coalesce((select json_agg(id::text) from retried), '[]'::json) as ids`;
  return bulkRetried(ctx.events, name, row, dryRun);
}

/**
 * Jobs by status and the age of the oldest `Queued` one, for metrics and the dashboard.
 *
 * @returns every status, 0 when it has no rows; ages in seconds.
 */
export async function stats(sql: Sql): Promise<QueueStats> {
  const [row] = await sql<StatsRow[]>`
    select
      (select jsonb_object_agg(status, n) from (
        select status, count(*)::int as n from ssg_rebuild_jobs group by status) s) as by_status,
      (select extract(epoch from now() - min(created_at))::float8 from ssg_rebuild_jobs
        where status = 'Queued') as oldest_s`;
  return statsOf(STATUSES, row);
}
