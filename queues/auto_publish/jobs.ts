/**
 * What the API and the dashboard do to the auto-publish queue's jobs, in the queue's own statements:
 * enqueue, read, list and search (keyset pages, newest first), cancel, admin retry (one job, or
 * every match of a filter in one statement) and the counts behind `/metrics` and `/admin`. The
 * consumer's verbs — claim, run, give back, recover — are mod.ts's.
 *
 * @module
 */
import {
  type AutoPublishContext,
  type AutoPublishJobRow,
  type AutoPublishStatus,
  BREAKER_FAILURES,
  BREAKER_WINDOW_H,
  COLUMNS,
  type CreateOutcome,
  name,
  publish,
} from "./mod.ts";
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
] as const satisfies readonly AutoPublishStatus[];

/**
 * Queue an auto-publish job for an edition, unless it already has one `Queued` or `Running` or
 * the breaker is open (ADR-022 row 5). Call it inside the ingestion save's transaction to
 * create the job with the edition.
 *
 * @param sql the pool, or the caller's transaction.
 * @param editionId bigint id, as a string.
 * @param priority higher is claimed first.
 * @returns the outcome; nothing is written unless `created`.
 * @throws Error when the outcome kept changing under three tries (a storm of concurrent settles).
 */
export async function enqueue(
  sql: Sql | TxSql,
  editionId: string,
  priority: number,
): Promise<CreateOutcome> {
  for (let i = 0; i < 3; i++) {
    // One statement: the breaker's count, the edition's existence and the insert see one snapshot;
    // the partial unique index settles a race between two creates (ON CONFLICT → nothing).
    const [job] = await sql<AutoPublishJobRow[]>`
      insert into auto_publish_jobs (edition_id, priority)
      select ${editionId}, ${priority}
      where exists (select 1 from editions where id = ${editionId})
        and (select count(*) from auto_publish_jobs
             where edition_id = ${editionId} and status = 'Failed' and cancelled_at is null
               and finished_at > now() - ${BREAKER_WINDOW_H} * interval '1 hour') < ${BREAKER_FAILURES}
      on conflict (edition_id) where status in ('Queued', 'Running') do nothing
      returning ${sql(COLUMNS)}`;
    if (job) return { outcome: "created", job };
    // Why not: the in-flight job, or the breaker with the moment the oldest of the last five
    // failures leaves the window (then fewer than five remain).
    const [why] = await sql<
      { edition: boolean; in_flight: string | null; failures: number; allowed_at: Date }[]
    >`
      select
        exists (select 1 from editions where id = ${editionId}) as edition,
        (select id from auto_publish_jobs
           where edition_id = ${editionId} and status in ('Queued', 'Running')) as in_flight,
        (select count(*)::int from auto_publish_jobs
           where edition_id = ${editionId} and status = 'Failed' and cancelled_at is null
             and finished_at > now() - ${BREAKER_WINDOW_H} * interval '1 hour') as failures,
        (select min(finished_at) + ${BREAKER_WINDOW_H} * interval '1 hour' from (
           select finished_at from auto_publish_jobs
           where edition_id = ${editionId} and status = 'Failed' and cancelled_at is null
           order by finished_at desc limit ${BREAKER_FAILURES}) f) as allowed_at`;
    if (!why.edition) return { outcome: "no_edition" };
    const inFlight = why.in_flight ? await getJob(sql, why.in_flight) : null;
    if (inFlight) return { outcome: "in_flight", job: inFlight };
    if (why.failures >= BREAKER_FAILURES) {
      return { outcome: "breaker", failures: why.failures, allowedAt: new Date(why.allowed_at) };
    }
  }
  throw new Error(
    `Cannot create an auto-publish job for edition ${editionId}: state kept changing`,
  );
}

/** Read one job; null when no row has that id. */
export async function getJob(sql: Sql | TxSql, id: string): Promise<AutoPublishJobRow | null> {
  const [row] = await sql<AutoPublishJobRow[]>`
    select ${sql(COLUMNS)} from auto_publish_jobs where id = ${id}`;
  return row ?? null;
}

/** A job as the list route shows it: the row and its subject (the edition's id and title). */
export interface AutoPublishListRow extends AutoPublishJobRow {
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
export async function list(sql: Sql, page: JobListPage): Promise<AutoPublishListRow[]> {
  return await sql<AutoPublishListRow[]>`
    select ${sql(COLUMNS.map((c) => `j.${c}`))},
           'edition ' || j.edition_id || coalesce(': ' || e.title, '') as subject
    from auto_publish_jobs j left join editions e on e.id = j.edition_id
    where true ${filtered(sql, page)}
      ${page.beforeId ? sql`and j.id < ${page.beforeId}` : sql``}
    order by j.id desc
    limit ${page.limit}`;
}

/**
 * The admin cancel: a `Queued` job → `Failed` with {@linkcode CANCELLED} and `cancelled_at` (the
 * breaker does not count it); a `Running` one is refused (`running_host`): the host's publish
 * may already have happened.
 */
export async function cancel(
  ctx: Pick<AutoPublishContext, "sql" | "events">,
  id: string,
): Promise<CancelOutcome<AutoPublishJobRow>> {
  return await cancelJob({
    queue: name,
    id,
    events: ctx.events,
    cancelRunnable: async () => {
      const [row] = await ctx.sql<AutoPublishJobRow[]>`
        update auto_publish_jobs
        set status = 'Failed', error = ${CANCELLED}, cancelled_at = now(), finished_at = now(),
            updated_at = now()
        where id = ${id} and status = 'Queued'
        returning ${ctx.sql(COLUMNS)}`;
      return row ?? null;
    },
    read: () => getJob(ctx.sql, id),
    running: "Running",
  });
}

/**
 * The bulk admin retry under {@linkcode retry}'s rule, in one statement: of the `Failed` jobs
 * matching `filter`, the newest of each edition that has no `Queued` or `Running` job (one job in
 * flight per edition), at most {@linkcode BULK_RETRY_MAX}; the others stay `Failed` (`skipped`).
 *
 * @param dryRun count only: nothing changes.
 */
export async function bulkRetry(
  ctx: Pick<AutoPublishContext, "sql" | "events">,
  filter: JobFilter,
  dryRun: boolean,
): Promise<BulkRetryOutcome> {
  const only = filtered(ctx.sql, { ...filter, status: "Failed" });
  const [row] = await ctx.sql<BulkRetryRow[]>`
    with matched as (
      select count(*)::int as n from (
        select from auto_publish_jobs j left join editions e on e.id = j.edition_id
        where true ${only} limit ${BULK_RETRY_MAX + 1}) m
    ), newest as (
      select distinct on (j.edition_id) j.id
      from auto_publish_jobs j left join editions e on e.id = j.edition_id
      where ${!dryRun} ${only}
        and not exists (select from auto_publish_jobs f
                        where f.edition_id = j.edition_id and f.status in ('Queued', 'Running'))
      order by j.edition_id, j.id desc
    ), picked as (
      select j.id from auto_publish_jobs j join newest n on n.id = j.id
      order by j.id desc
      limit ${BULK_RETRY_MAX}
      for update of j skip locked
    ), retried as (
      update auto_publish_jobs j
      set status = 'Queued', attempt_count = 0, error = null, claim_token = null, claimed_at = null,
          result = null, finished_at = null, cancelled_at = null, updated_at = now()
      from picked where j.id = picked.id and j.status = 'Failed'
      returning j.id
    )
    select (select n from matched) as matched,
           coalesce((select json_agg(id::text) from retried), '[]'::json) as ids`;
  return bulkRetried(ctx.events, name, row, dryRun);
}

/**
 * Admin retry: `Failed` → `Queued`, attempts reset, error and token cleared (ADR-022: only an
 * admin retry brings a `Failed` job back). Not subject to the breaker: it is the admin's override.
 *
 * @returns the row; `not_failed` (with the current row) when it is not `Failed`; `in_flight` when
 *   its edition meanwhile got another `Queued`/`Running` job; `absent`. Nothing changes but on
 *   `retried`.
 */
export async function retry(
  ctx: Pick<AutoPublishContext, "sql" | "events">,
  id: string,
): Promise<
  | { outcome: "retried" | "not_failed" | "in_flight"; job: AutoPublishJobRow }
  | { outcome: "absent" }
> {
  let row: AutoPublishJobRow | undefined;
  try {
    [row] = await ctx.sql<AutoPublishJobRow[]>`
      update auto_publish_jobs
      set status = 'Queued', attempt_count = 0, error = null, claim_token = null, claimed_at = null,
          result = null, finished_at = null, cancelled_at = null, updated_at = now()
      where id = ${id} and status = 'Failed'
      returning ${ctx.sql(COLUMNS)}`;
  } catch (err) {
    // 23505: auto_publish_jobs_one_in_flight — the edition already has a Queued or Running job.
    if ((err as { code?: string }).code !== "23505") throw err;
    const job = await getJob(ctx.sql, id);
    return job ? { outcome: "in_flight", job } : { outcome: "absent" };
  }
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
        select status, count(*)::int as n from auto_publish_jobs group by status) s) as by_status,
      (select extract(epoch from now() - min(created_at))::float8 from auto_publish_jobs
        where status = 'Queued') as oldest_s`;
  return statsOf(STATUSES, row);
}
