/**
 * The SEO backfill queue's admin view (lib/admin/queue_view.ts): its own statements over
 * `seo_backfill_jobs` for `/admin` and `/metrics` — a host-polled queue (no lock in this process;
 * the poller and the admin crew path settle through the claim API) with an admin retry.
 *
 * @module
 */
import type { Sql } from "../../lib/db.ts";
import {
  type JobDetail,
  type JobPage,
  type JobSummary,
  type QueueView,
  retryOutcome,
  type Throughput,
} from "../../lib/admin/queue_view.ts";
import { getJob, name, retry, stats } from "./mod.ts";

// Newest first, keyset-paged on the primary key (no OFFSET); bounded by `limit`.
async function listJobs(sql: Sql, page: JobPage): Promise<JobSummary[]> {
  return await sql<JobSummary[]>`
    select j.id, j.status, j.attempt_count,
           'edition ' || j.edition_id || coalesce(': ' || e.title, '')
             || coalesce(' (' || j.claimed_via || ')', '') as subject,
           j.error, j.created_at, j.updated_at
    from seo_backfill_jobs j left join editions e on e.id = j.edition_id
    where true
      ${page.status ? sql`and j.status = ${page.status}` : sql``}
      ${page.beforeId ? sql`and j.id < ${page.beforeId}` : sql``}
    order by j.id desc
    limit ${page.limit}`;
}

// finished_at is written by complete, fail and the stale sweep.
async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where status = 'Completed')::int as completed,
           count(*) filter (where status = 'Failed')::int as failed
    from seo_backfill_jobs
    where finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

// The SEO fields the job applied (its result), one a row.
function details(_sql: Sql, job: Record<string, unknown>): Promise<JobDetail[]> {
  const result = (job.result ?? {}) as Record<string, unknown>;
  return Promise.resolve([{
    title: "SEO fields applied",
    columns: ["Field", "Value"],
    rows: Object.entries(result).map((
      [field, value],
    ) => [field, typeof value === "string" ? value : JSON.stringify(value)]),
  }]);
}

/** The SEO backfill queue's admin view. */
export const seoView: QueueView = {
  name,
  aliases: ["seo"],
  consumer: "host",
  statuses: ["Queued", "Running", "Completed", "Failed"],
  stats,
  throughput,
  listJobs,
  // The queue's own read: every column but the claim token.
  getJob: async (sql, id) => await getJob(sql, id) as Record<string, unknown> | null,
  retry: async (ctx, id) => retryOutcome((await retry(ctx, id)).outcome === "retried"),
  details,
};
