/**
 * The auto-publish queue's admin view (lib/admin/queue_view.ts): its own statements over
 * `auto_publish_jobs` for `/admin` and `/metrics` — a host-polled queue (no lock in this process),
 * its per-edition breaker (ADR-022 row 5) and its admin retry, which the queue refuses while the
 * edition has another `Queued` or `Running` job.
 *
 * @module
 */
import type { Sql } from "../../lib/db.ts";
import type { JobDetail, QueueView, Throughput } from "../../lib/admin/queue_view.ts";
import { BREAKER_FAILURES, BREAKER_WINDOW_H, name } from "./mod.ts";
import { bulkRetry, cancel, getJob, list, retry, stats, STATUSES } from "./jobs.ts";

// finished_at is written by complete, fail and recover.
async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where status = 'Completed')::int as completed,
           count(*) filter (where status = 'Failed')::int as failed
    from auto_publish_jobs
    where finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

// The breaker's own count (create() refuses an edition with this many failures in the window),
// over the partial index auto_publish_jobs_failures.
async function openBreakers(sql: Sql): Promise<number> {
  const [row] = await sql<{ open: number }[]>`
    select count(*)::int as open from (
      select edition_id from auto_publish_jobs
      where status = 'Failed' and cancelled_at is null
        and finished_at > now() - ${BREAKER_WINDOW_H} * interval '1 hour'
      group by edition_id
      having count(*) >= ${BREAKER_FAILURES}) b`;
  return row.open;
}

// The edition it publishes, and what the poller reported.
async function details(sql: Sql, job: Record<string, unknown>): Promise<JobDetail[]> {
  const [edition] = await sql<{ title: string; published_at: Date | null }[]>`
    select title, published_at from editions where id = ${String(job.edition_id)}`;
  return [{
    title: `Edition ${job.edition_id}`,
    columns: ["Title", "Published at"],
    rows: edition ? [[edition.title, edition.published_at?.toISOString() ?? null]] : [],
  }];
}

/** The auto-publish queue's admin view. */
export const autoPublishView: QueueView = {
  name,
  aliases: ["auto-publish"],
  consumer: "host",
  statuses: STATUSES,
  stats,
  throughput,
  listJobs: list,
  cancel: (ctx, id) => cancel(ctx, id),
  bulkRetry,
  // The queue's own read: every column but the claim token.
  getJob: async (sql, id) => await getJob(sql, id) as Record<string, unknown> | null,
  retry: async (ctx, id) => {
    const done = await retry(ctx, id);
    if (done.outcome === "retried") return { retried: true };
    if (done.outcome === "in_flight") {
      return {
        retried: false,
        reason: `edition ${done.job.edition_id} already has a Queued or Running job`,
      };
    }
    return { retried: false, reason: "only Failed jobs can be retried" };
  },
  details,
  openBreakers,
};
