/**
 * The ingestion queue's admin view (lib/admin/queue_view.ts): its own statements for `/admin` and
 * `/metrics` — pages of `ingestion_jobs`, one job, the last hour's settled jobs, and a job's
 * edition (its chapters and its warnings).
 *
 * @module
 */
import type { Sql } from "../../lib/db.ts";
import {
  type ChapterSize,
  chapterTable,
  type JobDetail,
  type QueueView,
  retryOutcome,
  type Throughput,
} from "../../lib/admin/queue_view.ts";
import { name } from "./mod.ts";
import { bulkRetry, cancel, getJob, list, retry, stats, STATUSES } from "./jobs.ts";

// finished_at is written by every settle to Completed or Failed; the count runs in the
// background cacher (lib/admin/stats_cache.ts), never per request.
async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where status = 'Completed')::int as completed,
           count(*) filter (where status = 'Failed')::int as failed
    from ingestion_jobs
    where finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

// The edition's chapters by position, and its warnings as ingestion stored them
// ([{ kind, message }], sql/008_edition_fidelity.sql).
async function details(sql: Sql, job: Record<string, unknown>): Promise<JobDetail[]> {
  if (job.edition_id == null) return [];
  const editionId = String(job.edition_id);
  const [edition] = await sql<
    {
      title: string;
      format: string;
      asset_version: number;
      language: string | null;
      warnings: { kind: string; message: string }[];
    }[]
  >`
    select title, format, asset_version, language, warnings from editions where id = ${editionId}`;
  if (!edition) return [];
  const chapters = await sql<ChapterSize[]>`
    select position, title, octet_length(html) as bytes
    from chapters where edition_id = ${editionId} order by position`;
  const title = `Edition ${editionId}: ${edition.title} (${edition.format}, ${
    edition.language ?? "language unknown"
  }, assets v${edition.asset_version})`;
  return [chapterTable(title, chapters), {
    title: "Warnings",
    columns: ["Kind", "Message"],
    rows: edition.warnings.map((w) => [w.kind, w.message]),
  }];
}

/** The ingestion queue's admin view. */
export const ingestionView: QueueView = {
  name,
  consumer: "worker",
  statuses: STATUSES,
  stats,
  throughput,
  listJobs: list,
  // The queue's own read (every column).
  getJob: async (sql, id) => await getJob({ sql }, id) as Record<string, unknown> | null,
  retry: async (ctx, id) => retryOutcome((await retry(ctx, id)) !== null),
  cancel,
  bulkRetry,
  details,
};
