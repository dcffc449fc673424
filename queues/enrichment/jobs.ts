/**
 * What the API and the dashboard do to the enrichment queue's jobs, in the queue's own statements:
 * enqueue, read, list and search (keyset pages, newest first), cancel, admin retry (one job, or
 * every match of a filter in one statement) and the counts behind `/metrics` and `/admin`. The
 * consumer's verbs — claim, run, give back, recover — are mod.ts's.
 *
 * @module
 */
import { type EnrichmentStatus, type EnrichmentView, getJob, name } from "./mod.ts";
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
  publishCancelled,
  type QueueControl,
} from "../../lib/control.ts";
import { statsOf, type StatsRow } from "../../lib/admin/queue_view.ts";

/** The queue's statuses, in lifecycle order (its list's filter, its stats, its view). */
export const STATUSES = [
  "Pending",
  "Running",
  "Completed",
  "Failed",
] as const satisfies readonly EnrichmentStatus[];

/** A book in the queue as the list route shows it (its id is the user book's). */
export interface EnrichmentListRow {
  id: string;
  status: EnrichmentStatus;
  attempt_count: number;
  error: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  attempts: unknown[];
  title: string | null;
  author: string | null;
  book_status: string;
  /** The book's title (or "untitled book <id>"). */
  subject: string;
  created_at: Date;
  updated_at: Date;
}

// The filter of the list and the bulk retry: an enrichment status, `q` in the title or the id.
export function filtered(sql: Sql, filter: JobFilter) {
  const q = filter.q;
  return sql`
    ${filter.status ? sql`and metadata_enrichment_status = ${filter.status}` : sql``}
    ${q ? sql`and (title ilike ${containing(q)} or id::text = ${q})` : sql``}`;
}

/**
 * A page of the books in the queue (enrichment status set), newest first, keyset-paged on the
 * book's id (no OFFSET, no count).
 */
export async function list(sql: Sql, page: JobListPage): Promise<EnrichmentListRow[]> {
  return await sql<EnrichmentListRow[]>`
    select id, metadata_enrichment_status as status,
           metadata_enrichment_attempt_count as attempt_count, metadata_enrichment_error as error,
           metadata_enrichment_started_at as started_at,
           metadata_enrichment_finished_at as finished_at,
           metadata_enrichment_attempts as attempts, title, author, status as book_status,
           coalesce(title, 'untitled book ' || id) as subject, created_at, updated_at
    from user_books
    where metadata_enrichment_status is not null ${filtered(sql, page)}
      ${page.beforeId ? sql`and id < ${page.beforeId}` : sql``}
    order by id desc
    limit ${page.limit}`;
}

/**
 * The admin cancel of a book's enrichment: `Pending` → `Failed` with {@linkcode CANCELLED}; a
 * `Running` one's run is asked to stop and settled by {@linkcode cancelRun}. A retry brings it
 * back.
 */
export async function cancel(
  ctx: QueueContext,
  id: string,
  control: Pick<QueueControl, "requestCancel">,
): Promise<CancelOutcome<EnrichmentView>> {
  const read = async () => {
    const job = await getJob(ctx, id);
    return job?.status ? job : null; // a book not in the queue has no enrichment to cancel
  };
  return await cancelJob({
    queue: name,
    id,
    cancelRunnable: async () => {
      const rows = await ctx.sql`
        update user_books
        set metadata_enrichment_status = 'Failed', metadata_enrichment_error = ${CANCELLED},
            metadata_enrichment_finished_at = now(), updated_at = now()
        where id = ${id} and metadata_enrichment_status = 'Pending'`;
      if (rows.count === 0) return null;
      const job = await getJob(ctx, id);
      // Published here, not by cancelJob: also when the book is gone by the read (attempt 0).
      publishCancelled(ctx.events, name, id, job?.attempt_count ?? 0);
      return job;
    },
    read,
    running: "Running",
    requestCancel: () => control.requestCancel(name, id),
  });
}

/**
 * The bulk admin retry: every `Failed` book matching `filter` (newest first, at most
 * {@linkcode BULK_RETRY_MAX}) → `Pending`, {@linkcode retry}'s rule, in one statement that also
 * counts the matching books.
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
        select from user_books where true ${only} limit ${BULK_RETRY_MAX + 1}) m
    ), picked as (
      select id from user_books
      where ${!dryRun} ${only}
      order by id desc
      limit ${BULK_RETRY_MAX}
      for update skip locked
    ), retried as (
      update user_books b
      set metadata_enrichment_status = 'Pending', metadata_enrichment_attempt_count = 0,
          metadata_enrichment_error = null, metadata_enrichment_claimed_by = null,
          metadata_enrichment_started_at = null, metadata_enrichment_finished_at = null,
          metadata_enrichment_intent = gen_random_uuid(), metadata_enrichment_run_after = null,
          updated_at = now()
      from picked where b.id = picked.id and b.metadata_enrichment_status = 'Failed'
      returning b.id
    )
    select (select n from matched) as matched,
           coalesce((select json_agg(id::text) from retried), '[]'::json) as ids`;
  return bulkRetried(ctx.events, name, row, dryRun, "Pending");
}

/**
 * Books by enrichment status and the age of the oldest `Pending` one (since it was last updated),
 * for metrics. Books not yet `Ready` (status null) are not counted.
 *
 * @returns every status, 0 when it has no rows; ages in seconds.
 */
export async function stats(sql: Sql): Promise<QueueStats> {
  const [row] = await sql<StatsRow[]>`
    select
      (select jsonb_object_agg(s, n) from (
        select metadata_enrichment_status as s, count(*)::int as n from user_books
        where metadata_enrichment_status is not null group by 1) s) as by_status,
      (select extract(epoch from now() - min(updated_at))::float8 from user_books
        where metadata_enrichment_status = 'Pending') as oldest_s`;
  return statsOf(STATUSES, row);
}
