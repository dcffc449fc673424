/**
 * What the API and the dashboard do to the SEO backfill queue's jobs, in the queue's own statements:
 * enqueue, read, list and search (keyset pages, newest first), cancel, admin retry (one job, or
 * every match of a filter in one statement) and the counts behind `/metrics` and `/admin`. The
 * consumer's verbs — claim, run, give back, recover — are mod.ts's.
 *
 * @module
 */
import { COLUMNS, name, publish, type SeoContext, type SeoJobRow, type SeoStatus } from "./mod.ts";
import type { Sql, TxSql } from "../../lib/db.ts";
import {
  BULK_RETRY_MAX,
  type BulkRetryOutcome,
  CANCELLED,
  type CancelOutcome,
  containing,
  type JobFilter,
  type JobListPage,
  type QueueStats,
} from "../../lib/queue.ts";
import { bulkRetried, type BulkRetryRow, cancelJob } from "../../lib/control.ts";
import { statsOf, type StatsRow } from "../../lib/admin/queue_view.ts";

/** The queue's statuses, in lifecycle order (its list's filter, its stats, its view). */
export const STATUSES = [
  "Queued",
  "Running",
  "Completed",
  "Failed",
] as const satisfies readonly SeoStatus[];

/**
 * Queue an SEO job for an edition.
 *
 * @returns the new row, or null when no edition has that id (nothing is written).
 */
export async function enqueue(
  ctx: Pick<SeoContext, "sql">,
  editionId: string,
): Promise<SeoJobRow | null> {
  const [row] = await ctx.sql<SeoJobRow[]>`
    insert into seo_backfill_jobs (edition_id)
    select id from editions where id = ${editionId}
    returning ${ctx.sql(COLUMNS)}`;
  return row ?? null;
}

/** Read one job; null when no row has that id. */
export async function getJob(sql: Sql | TxSql, id: string): Promise<SeoJobRow | null> {
  const [row] = await sql<SeoJobRow[]>`
    select ${sql(COLUMNS)} from seo_backfill_jobs where id = ${id}`;
  return row ?? null;
}

/** A job as the list route shows it: the row and its subject (the edition's id and title). */
export interface SeoListRow extends SeoJobRow {
  subject: string;
}

// The filter of the list and the bulk retry: a status, and `q` in the edition's id or title.
export function filtered(sql: Sql, filter: JobFilter) {
  const q = filter.q;
  return sql`
    ${filter.status ? sql`and j.status = ${filter.status}` : sql``}
    ${q ? sql`and (j.edition_id::text = ${q} or e.title ilike ${containing(q)})` : sql``}`;
}

/**
 * A page of jobs, newest first, keyset-paged on the primary key (no OFFSET, no count).
 *
 * @param page `status` and `q` filters, `limit` rows, `beforeId` the previous page's last id.
 * @returns the rows, each with its `subject`.
 */
export async function list(sql: Sql, page: JobListPage): Promise<SeoListRow[]> {
  return await sql<SeoListRow[]>`
    select ${sql(COLUMNS.map((c) => `j.${c}`))},
           'edition ' || j.edition_id || coalesce(': ' || e.title, '')
             || coalesce(' (' || j.claimed_via || ')', '') as subject
    from seo_backfill_jobs j left join editions e on e.id = j.edition_id
    where true ${filtered(sql, page)}
      ${page.beforeId ? sql`and j.id < ${page.beforeId}` : sql``}
    order by j.id desc
    limit ${page.limit}`;
}

/**
 * The admin cancel: a `Queued` job → `Failed` with {@linkcode CANCELLED}; a `Running` one (a
 * poller's or the crew path's) is refused (`running_host`).
 */
export async function cancel(
  ctx: Pick<SeoContext, "sql" | "events">,
  id: string,
): Promise<CancelOutcome<SeoJobRow>> {
  return await cancelJob({
    queue: name,
    id,
    events: ctx.events,
    cancelRunnable: async () => {
      const [row] = await ctx.sql<SeoJobRow[]>`
        update seo_backfill_jobs
        set status = 'Failed', error = ${CANCELLED}, finished_at = now(), updated_at = now()
        where id = ${id} and status = 'Queued'
        returning ${ctx.sql(COLUMNS)}`;
      return row ?? null;
    },
    read: () => getJob(ctx.sql, id),
    running: "Running",
  });
}

/**
 * The bulk admin retry: every `Failed` job matching `filter` (newest first, at most
 * {@linkcode BULK_RETRY_MAX}) → `Queued` by {@linkcode retry}'s rule, in one statement that also
 * counts the matching jobs.
 *
 * @param dryRun count only: nothing changes.
 */
export async function bulkRetry(
  ctx: Pick<SeoContext, "sql" | "events">,
  filter: JobFilter,
  dryRun: boolean,
): Promise<BulkRetryOutcome> {
  const only = filtered(ctx.sql, { ...filter, status: "Failed" });
  const [row] = await ctx.sql<BulkRetryRow[]>`
    with matched as (
      select count(*)::int as n from (
        select from seo_backfill_jobs j left join editions e on e.id = j.edition_id
        where true ${only} limit ${BULK_RETRY_MAX + 1}) m
    ), picked as (
      select j.id from seo_backfill_jobs j left join editions e on e.id = j.edition_id
      where ${!dryRun} ${only}
      order by j.id desc
      limit ${BULK_RETRY_MAX}
      for update of j skip locked
    ), retried as (
      update seo_backfill_jobs j
      set status = 'Queued', attempt_count = 0, error = null, claim_token = null, claimed_at = null,
          claimed_via = null, result = null, finished_at = null, updated_at = now()
      from picked where j.id = picked.id and j.status = 'Failed'
      returning j.id
    )
    select (select n from matched) as matched,
           coalesce((select json_agg(id::text) from retried), '[]'::json) as ids`;
  return bulkRetried(ctx.events, name, row, dryRun);
}

/**
 * Admin retry: `Failed` → `Queued`, attempts reset, error and token cleared.
 *
 * @returns `retried`, `not_failed` (the current row; nothing changes) or `absent`.
 */
export async function retry(
  ctx: Pick<SeoContext, "sql" | "events">,
  id: string,
): Promise<{ outcome: "retried" | "not_failed"; job: SeoJobRow } | { outcome: "absent" }> {
  const [row] = await ctx.sql<SeoJobRow[]>`
    update seo_backfill_jobs
    set status = 'Queued', attempt_count = 0, error = null, claim_token = null, claimed_at = null,
        claimed_via = null, result = null, finished_at = null, updated_at = now()
    where id = ${id} and status = 'Failed'
    returning ${ctx.sql(COLUMNS)}`;
  if (row) {
    publish(ctx, row, "retried");
    return { outcome: "retried", job: row };
  }
  const job = await getJob(ctx.sql, id);
  return job ? { outcome: "not_failed", job } : { outcome: "absent" };
}

/**
 * Jobs by status and the age of the oldest `Queued` one, for metrics and the dashboard.
 *
 * @returns every status, 0 when it has no rows; age in seconds (null when none is queued).
 */
export async function stats(sql: Sql): Promise<QueueStats> {
  const [row] = await sql<StatsRow[]>`
    select
      (select jsonb_object_agg(status, n) from (
        select status, count(*)::int as n from seo_backfill_jobs group by status) s) as by_status,
      (select extract(epoch from now() - min(created_at))::float8 from seo_backfill_jobs
        where status = 'Queued') as oldest_s`;
  return statsOf(STATUSES, row);
}
