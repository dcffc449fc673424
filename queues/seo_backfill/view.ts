/**
 * The SEO backfill queue's admin view (lib/admin/queue_view.ts): its own statements over
 * `seo_backfill_jobs` for `/admin` and `/metrics` — a host-polled queue (no lock in this process;
 * the poller and the admin crew path settle through the claim API) with an admin retry.
 *
 * @module
 */
import type { Sql } from "../../lib/db.ts";
import {
  fieldRows,
  type JobDetail,
  type QueueView,
  retryOutcome,
  type Throughput,
} from "../../lib/admin/queue_view.ts";
import { name } from "./mod.ts";
import { bulkRetry, cancel, getJob, list, retry, stats, STATUSES } from "./jobs.ts";

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
    rows: fieldRows(result),
  }]);
}

/** The SEO backfill queue's admin view. */
export const seoView: QueueView = {
  name,
  aliases: ["seo"],
  consumer: "host",
  statuses: STATUSES,
  stats,
  throughput,
  listJobs: list,
  cancel: (ctx, id) => cancel(ctx, id),
  bulkRetry,
  // The queue's own read: every column but the claim token.
  getJob: async (sql, id) => await getJob(sql, id) as Record<string, unknown> | null,
  retry: async (ctx, id) => retryOutcome((await retry(ctx, id)).outcome === "retried"),
  details,
};
