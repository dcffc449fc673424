/**
 * What the API and the dashboard do to the user-ingestion queue's jobs, in the queue's own statements:
 * enqueue, read, list and search (keyset pages, newest first), cancel, admin retry (one job, or
 * every match of a filter in one statement) and the counts behind `/metrics` and `/admin`. The
 * consumer's verbs — claim, run, give back, recover — are mod.ts's.
 *
 * @module
 */
import {
  CANCELLED_MESSAGE,
  name,
  type UserBookRow,
  type UserIngestionJobRow,
  type UserIngestionListRow,
  type UserIngestionStatus,
} from "./mod.ts";
import { type Sql, transaction } from "../../lib/db.ts";
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
] as const satisfies readonly UserIngestionStatus[];

/**
 * Create a user book (`Processing`) and its `Queued` job in one transaction; the commit NOTIFYs
 * the consumer.
 *
 * @param ownerId the reader's id, a positive integer.
 * @param sourcePath relative to the storage root, already checked.
 * @returns both rows.
 */
export async function enqueue(
  ctx: QueueContext,
  ownerId: number,
  sourcePath: string,
): Promise<{ user_book: UserBookRow; job: UserIngestionJobRow }> {
  return await transaction(ctx.sql, ctx.log, async (tx) => {
    const [book] = await tx.sql<UserBookRow[]>`
      insert into user_books (owner_id) values (${ownerId})
      returning id, owner_id, title, author, format, status, error, created_at, updated_at`;
    const [job] = await tx.sql<UserIngestionJobRow[]>`
      insert into user_ingestion_jobs (user_book_id, source_path)
      values (${book.id}, ${sourcePath})
      returning *`;
    return { user_book: book, job };
  });
}

/** Read a user book and its (latest) job; null when no book has that id. */
export async function getUserBook(
  ctx: QueueContext,
  id: string,
): Promise<{ user_book: UserBookRow; job: UserIngestionJobRow | null } | null> {
  const [book] = await ctx.sql<UserBookRow[]>`
    select id, owner_id, title, author, format, status, error, created_at, updated_at
    from user_books where id = ${id}`;
  if (!book) return null;
  const [job] = await ctx.sql<UserIngestionJobRow[]>`
    select * from user_ingestion_jobs where user_book_id = ${id} order by id desc limit 1`;
  return { user_book: book, job: job ?? null };
}

/** Read one job; null when no row has that id. */
export async function getJob(
  ctx: Pick<QueueContext, "sql">,
  id: string,
): Promise<UserIngestionJobRow | null> {
  const [row] = await ctx.sql<UserIngestionJobRow[]>`
    select * from user_ingestion_jobs where id = ${id}`;
  return row ?? null;
}

/**
 * Admin retry: `Failed` → `Queued` with attempts reset and error cleared, and its user book back
 * to `Processing` without its message, in one statement (ADR-022: "Failed is terminal. Only an
 * admin retry brings it back"). The commit NOTIFYs the consumer.
 *
 * @returns the updated job, or null when it is not `Failed` (or does not exist): nothing changes.
 */
export async function retry(ctx: QueueContext, id: string): Promise<UserIngestionJobRow | null> {
  const [row] = await ctx.sql<UserIngestionJobRow[]>`
    with job as (
      update user_ingestion_jobs
      set status = 'Queued', attempt_count = 0, error = null, claimed_by = null, claimed_at = null,
          run_after = now(), finished_at = null, updated_at = now()
      where id = ${id} and status = 'Failed'
      returning *
    ), book as (
      update user_books set status = 'Processing', error = null, updated_at = now()
      where id = (select user_book_id from job) and status = 'Failed'
    )
    select * from job`;
  if (row) publishRetried(ctx.events, name, id);
  return row ?? null;
}

// The filter of the list and the bulk retry: a status, and `q` in the source path, the book's id
// or its title.
export function filtered(sql: Sql, filter: JobFilter) {
  const q = filter.q;
  return sql`
    ${filter.status ? sql`and j.status = ${filter.status}` : sql``}
    ${
    q
      ? sql`and (j.source_path ilike ${containing(q)} or j.user_book_id::text = ${q}
          or b.title ilike ${containing(q)})`
      : sql``
  }`;
}

/**
 * A page of jobs, newest first, keyset-paged on the job's id (no OFFSET, no count), each with
 * its book's title and status.
 */
export async function list(sql: Sql, page: JobListPage): Promise<UserIngestionListRow[]> {
  return await sql<UserIngestionListRow[]>`
    select j.*, b.title, b.status as book_status,
           'book ' || j.user_book_id || coalesce(' ' || b.title, '') || ': ' || j.source_path
             as subject
    from user_ingestion_jobs j join user_books b on b.id = j.user_book_id
    where true ${filtered(sql, page)}
      ${page.beforeId ? sql`and j.id < ${page.beforeId}` : sql``}
    order by j.id desc
    limit ${page.limit}`;
}

/**
 * The admin cancel of a job: `Queued` → `Failed` with {@linkcode CANCELLED} and its book `Failed`
 * with {@linkcode CANCELLED_MESSAGE}, in one statement; a `Processing` job's run is asked to stop
 * and settled by {@linkcode cancelRun}. A retry brings both back.
 */
export async function cancel(
  ctx: QueueContext,
  id: string,
  control: Pick<QueueControl, "requestCancel">,
): Promise<CancelOutcome<UserIngestionJobRow>> {
  return await cancelJob({
    queue: name,
    id,
    events: ctx.events,
    cancelRunnable: async () => {
      const [row] = await ctx.sql<UserIngestionJobRow[]>`
        with job as (
          update user_ingestion_jobs
          set status = 'Failed', error = ${CANCELLED}, finished_at = now(), updated_at = now()
          where id = ${id} and status = 'Queued'
          returning *
        ), book as (
          update user_books set status = 'Failed', error = ${CANCELLED_MESSAGE}, updated_at = now()
          where id = (select user_book_id from job) and status = 'Processing'
        )
        select * from job`;
      return row ?? null;
    },
    read: () => getJob(ctx, id),
    running: "Processing",
    requestCancel: () => control.requestCancel(name, id),
  });
}

/**
 * The bulk admin retry: every `Failed` job matching `filter` (newest first, at most
 * {@linkcode BULK_RETRY_MAX}) → `Queued` with its book back to `Processing`, {@linkcode retry}'s
 * rule, in one statement that also counts the matching jobs.
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
        select from user_ingestion_jobs j join user_books b on b.id = j.user_book_id
        where true ${only} limit ${BULK_RETRY_MAX + 1}) m
    ), picked as (
      select j.id from user_ingestion_jobs j join user_books b on b.id = j.user_book_id
      where ${!dryRun} ${only}
      order by j.id desc
      limit ${BULK_RETRY_MAX}
      for update of j skip locked
    ), retried as (
      update user_ingestion_jobs j
      set status = 'Queued', attempt_count = 0, error = null, claimed_by = null, claimed_at = null,
          run_after = now(), finished_at = null, updated_at = now()
      from picked where j.id = picked.id and j.status = 'Failed'
      returning j.id, j.user_book_id
    ), books as (
      update user_books set status = 'Processing', error = null, updated_at = now()
      where id in (select user_book_id from retried) and status = 'Failed'
    )
    select (select n from matched) as matched,
           coalesce((select json_agg(id::text) from retried), '[]'::json) as ids`;
  return bulkRetried(ctx.events, name, row, dryRun);
}

/**
 * Jobs by status and the age of the oldest claimable one (Queued and due), for metrics.
 *
 * @returns every status, 0 when it has no rows; ages in seconds.
 */
export async function stats(sql: Sql): Promise<QueueStats> {
  const [row] = await sql<StatsRow[]>`
    select
      (select jsonb_object_agg(status, n) from (
        select status, count(*)::int as n from user_ingestion_jobs group by status) s) as by_status,
      (select extract(epoch from now() - min(run_after))::float8 from user_ingestion_jobs
        where status = 'Queued' and run_after <= now()) as oldest_s`;
  return statsOf(STATUSES, row);
}
