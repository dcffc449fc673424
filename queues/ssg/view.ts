/**
 * The site rebuild queue's admin view (lib/admin/queue_view.ts): its own statements over
 * `ssg_rebuild_jobs` for `/admin` and `/metrics`, and its admin retry under its own rule (a
 * `Failed` job is not re-queued while another Full rebuild is already `Queued`).
 *
 * @module
 */
import type { Sql } from "../../lib/db.ts";
import type { QueueView, Throughput } from "../../lib/admin/queue_view.ts";
import { name } from "./mod.ts";
import { bulkRetry, cancel, getJob, list, retry, stats, STATUSES } from "./jobs.ts";

// finished_at is written by the settles to Completed and Failed (and recover's Failed).
async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where status = 'Completed')::int as completed,
           count(*) filter (where status = 'Failed')::int as failed
    from ssg_rebuild_jobs
    where finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

/** The site rebuild queue's admin view. */
export const ssgView: QueueView = {
  name,
  consumer: "worker",
  statuses: STATUSES,
  stats,
  throughput,
  listJobs: list,
  cancel,
  bulkRetry,
  // The queue's own read (every column).
  getJob: async (sql, id) => await getJob({ sql }, id) as Record<string, unknown> | null,
  retry: async (ctx, id) => {
    if (await retry(ctx, id)) return { retried: true };
    // retry() answers null for both refusals; the row tells them apart.
    const job = await getJob(ctx, id);
    return job?.status === "Failed"
      ? {
        retried: false,
        reason: "another Full rebuild is already Queued (it renders everything this one would)",
      }
      : { retried: false, reason: "only Failed jobs can be retried" };
  },
};
