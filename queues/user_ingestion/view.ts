/**
 * The user ingestion queue's admin view (lib/admin/queue_view.ts): its own statements over
 * `user_ingestion_jobs` for `/admin` and `/metrics`, and a job's user book (its status, the
 * reader's message, its chapters).
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

// finished_at is written by every settle to Completed or Failed.
async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where status = 'Completed')::int as completed,
           count(*) filter (where status = 'Failed')::int as failed
    from user_ingestion_jobs
    where finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

// The user book as the reader sees it (its status and message), and its chapters.
async function details(sql: Sql, job: Record<string, unknown>): Promise<JobDetail[]> {
  const bookId = String(job.user_book_id);
  const [book] = await sql<
    { status: string; error: string | null; title: string | null; format: string | null }[]
  >`select status, error, title, format from user_books where id = ${bookId}`;
  if (!book) return [];
  const chapters = await sql<ChapterSize[]>`
    select position, title, octet_length(html) as bytes
    from user_chapters where user_book_id = ${bookId} order by position`;
  return [{
    title: `User book ${bookId}`,
    columns: ["Status", "Title", "Format", "Reader's message"],
    rows: [[book.status, book.title, book.format, book.error]],
  }, chapterTable("Chapters", chapters)];
}

/** The user ingestion queue's admin view. */
export const userIngestionView: QueueView = {
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
