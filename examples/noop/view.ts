/**
 * The example queue's admin view (lib/admin/queue_view.ts): its own statements over `noop_jobs`
 * for `/admin` and `/metrics`. No retry: a no-op job cannot fail.
 *
 * @module
 */
import type { Sql } from "../../lib/db.ts";
import type { JobPage, JobSummary, QueueView, Throughput } from "../../lib/admin/queue_view.ts";
import type { QueueStats } from "../../lib/queue.ts";
import { name } from "./mod.ts";

// Counted over the whole table: the example's table stays small.
async function stats(sql: Sql): Promise<QueueStats> {
  const [row] = await sql<
    { by_status: Record<string, number> | null; oldest_s: number | null }[]
  >`
    select
      (select jsonb_object_agg(status, n) from (
        select status, count(*)::int as n from noop_jobs group by status) s) as by_status,
      (select extract(epoch from now() - min(created_at))::float8 from noop_jobs
        where status = 'Queued') as oldest_s`;
  const byStatus = { Queued: 0, Processing: 0, Completed: 0, Failed: 0, ...row.by_status };
  return { byStatus, oldestRunnableAgeS: row.oldest_s };
}

async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where status = 'Completed')::int as completed, 0 as failed
    from noop_jobs
    where finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

// Newest first, keyset-paged on the primary key; bounded by `limit`.
async function listJobs(sql: Sql, page: JobPage): Promise<JobSummary[]> {
  return await sql<JobSummary[]>`
    select id, status, attempt_count, 'no-op' as subject, null as error, created_at,
           coalesce(finished_at, claimed_at, created_at) as updated_at
    from noop_jobs
    where true
      ${page.status ? sql`and status = ${page.status}` : sql``}
      ${page.beforeId ? sql`and id < ${page.beforeId}` : sql``}
    order by id desc
    limit ${page.limit}`;
}

/** The example queue's admin view. */
export const noopView: QueueView = {
  name,
  consumer: "worker",
  statuses: ["Queued", "Processing", "Completed", "Failed"],
  stats,
  throughput,
  listJobs,
  getJob: async (sql, id) => {
    const [row] = await sql<Record<string, unknown>[]>`select * from noop_jobs where id = ${id}`;
    return row ?? null;
  },
};
