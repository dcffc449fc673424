/**
 * What the API and the dashboard do to the ingestion queue's jobs, in the queue's own statements:
 * enqueue, read, list and search (keyset pages, newest first), cancel, admin retry (one job, or
 * every match of a filter in one statement) and the counts behind `/metrics` and `/admin`. The
 * consumer's verbs — claim, run, give back, recover — are mod.ts's.
 *
 * @module
 */
import { type IngestionJobRow, type IngestionListRow, type IngestionStatus, name } from "./mod.ts";
import { type Sql } from "../../lib/db.ts";
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
  "Processing",
  "Completed",
  "Failed",
] as const satisfies readonly IngestionStatus[];

/**
 * Insert a `Queued` job; its commit NOTIFYs the consumer.
 *
 * @param sourcePath relative to the storage root, already checked (books/source_path.ts).
 * @param editionId an edition to re-ingest, or null for a new one.
 * @returns the new row.
 */
export async function enqueue(
  ctx: QueueContext,
  sourcePath: string,
  editionId: string | null,
): Promise<IngestionJobRow> {
  const [row] = await ctx.sql<IngestionJobRow[]>`
    insert into ingestion_jobs (source_path, edition_id)
    values (${sourcePath}, ${editionId})
    returning *`;
  return row;
}

/** Read one job; null when no row has that id. */
export async function getJob(
  ctx: Pick<QueueContext, "sql">,
  id: string,
): Promise<IngestionJobRow | null> {
  const [row] = await ctx.sql<IngestionJobRow[]>`select * from ingestion_jobs where id = ${id}`;
  return row ?? null;
}

/** Whether an edition with this id exists. */
export async function editionExists(ctx: QueueContext, id: string): Promise<boolean> {
  const rows = await ctx.sql`select 1 from editions where id = ${id}`;
  return rows.length > 0;
}

/**
 * Admin retry: `Failed` → `Queued` with attempts reset and error cleared (ADR-022: "Failed is
 * terminal. Only an admin retry brings it back").
 *
 * @returns the updated row, or null when the job is not `Failed` (or does not exist); nothing
 *   changes then.
 */
export async function retry(ctx: QueueContext, id: string): Promise<IngestionJobRow | null> {
  const [row] = await ctx.sql<IngestionJobRow[]>`
    update ingestion_jobs
    set status = 'Queued', attempt_count = 0, error = null, claimed_by = null, claimed_at = null,
        run_after = now(), finished_at = null, updated_at = now()
    where id = ${id} and status = 'Failed'
    returning *`;
  if (row) publishRetried(ctx.events, name, id);
  return row ?? null;
}

// The filter of the list and the bulk retry: a status, and `q` in the source path, the edition's
// id or its title.
export function filtered(sql: Sql, filter: JobFilter) {
  const q = filter.q;
  return sql`
    ${filter.status ? sql`and j.status = ${filter.status}` : sql``}
    ${
    q
      ? sql`and (j.source_path ilike ${containing(q)} or j.edition_id::text = ${q}
          or exists (select from editions e where e.id = j.edition_id
                     and e.title ilike ${containing(q)}))`
      : sql``
  }`;
}

/**
 * A page of jobs, newest first: keyset-paged on the primary key (no OFFSET, no count: a deep page
 * costs what the first does, and jobs added meanwhile never shift a page). A status filter walks
 * that status's index (`ingestion_jobs_claimable`, `ingestion_jobs_failed`) or the primary key.
 *
 * @returns at most `page.limit` rows, each with its `subject` (the source path).
 */
export async function list(sql: Sql, page: JobListPage): Promise<IngestionListRow[]> {
  return await sql<IngestionListRow[]>`
    select j.*, j.source_path as subject
    from ingestion_jobs j
    where true ${filtered(sql, page)}
      ${page.beforeId ? sql`and j.id < ${page.beforeId}` : sql``}
    order by j.id desc
    limit ${page.limit}`;
}

/**
 * The admin cancel: a `Queued` job → `Failed` with {@linkcode CANCELLED} at once; a `Processing`
 * one is asked to stop (`requestCancel`, lib/control.ts) and, once its run has stopped, settled
 * by {@linkcode cancelRun}. A retry brings either back.
 *
 * @param control where the request goes: the instance running the job (lib/control.ts).
 */
export async function cancel(
  ctx: QueueContext,
  id: string,
  control: Pick<QueueControl, "requestCancel">,
): Promise<CancelOutcome<IngestionJobRow>> {
  return await cancelJob({
    queue: name,
    id,
    events: ctx.events,
    cancelRunnable: async () => {
      const [row] = await ctx.sql<IngestionJobRow[]>`
        update ingestion_jobs
        set status = 'Failed', error = ${CANCELLED}, finished_at = now(), updated_at = now()
        where id = ${id} and status = 'Queued'
        returning *`;
      return row ?? null;
    },
    read: () => getJob(ctx, id),
    running: "Processing",
    requestCancel: () => control.requestCancel(name, id),
  });
}

/**
 * The bulk admin retry: every `Failed` job matching `filter` (newest first, at most
 * {@linkcode BULK_RETRY_MAX}) → `Queued` by {@linkcode retry}'s rule, in one statement, which
 * also counts the matching jobs (up to the bound + 1) in the same snapshot.
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
        select from ingestion_jobs j where true ${only} limit ${BULK_RETRY_MAX + 1}) m
    ), picked as (
      select j.id from ingestion_jobs j
      where ${!dryRun} ${only}
      order by j.id desc
      limit ${BULK_RETRY_MAX}
      for update skip locked
    ), retried as (
      update ingestion_jobs j
      set status = 'Queued', attempt_count = 0, error = null, claimed_by = null, claimed_at = null,
          run_after = now(), finished_at = null, updated_at = now()
      from picked where j.id = picked.id and j.status = 'Failed'
      returning j.id
    )
    select (select n from matched) as matched,
           coalesce((select json_agg(id::text) from retried), '[]'::json) as ids`;
  return bulkRetried(ctx.events, name, row, dryRun);
}

/**
 * Jobs by status and the age of the oldest claimable one (Queued and due), for metrics and the
 * dashboard. One statement; `ingestion_jobs_claimable` serves the oldest-age part.
 *
 * @returns every status, 0 when it has no rows; ages in seconds.
 */
export async function stats(sql: Sql): Promise<QueueStats> {
  const [row] = await sql<StatsRow[]>`
    select
      (select jsonb_object_agg(status, n) from (
        select status, count(*)::int as n from ingestion_jobs group by status) s) as by_status,
      (select extract(epoch from now() - min(run_after))::float8 from ingestion_jobs
        where status = 'Queued' and run_after <= now()) as oldest_s`;
  return statsOf(STATUSES, row);
}
