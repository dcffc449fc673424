/**
 * The metadata enrichment queue's admin view (lib/admin/queue_view.ts): its own statements over the
 * `metadata_enrichment_*` columns of `user_books` for `/admin` and `/metrics`. A job is a user
 * book (its id is the book's); books not yet `Ready` (status null) are not in the queue.
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
import { Counter, type Registry } from "prom-client";
import { name, retry, tokensUsed, type TokenTally } from "./mod.ts";
import { bulkRetry, cancel, list, stats, STATUSES } from "./jobs.ts";

// The queue's own columns under their plain names (status, attempt_count, error, …), so the job
// page reads like every other queue's; null for a book that is not in the queue.
async function getJob(sql: Sql, id: string): Promise<Record<string, unknown> | null> {
  const [row] = await sql<Record<string, unknown>[]>`
    select id, metadata_enrichment_status as status,
           metadata_enrichment_attempt_count as attempt_count,
           metadata_enrichment_error as error, metadata_enrichment_claimed_by as claimed_by,
           metadata_enrichment_started_at as started_at,
           metadata_enrichment_finished_at as finished_at,
           metadata_enrichment_attempts as attempts, title, author, status as book_status,
           created_at, updated_at
    from user_books where id = ${id} and metadata_enrichment_status is not null`;
  return row ?? null;
}

// metadata_enrichment_finished_at is written by the settles to Completed and Failed.
async function throughput(sql: Sql, seconds: number): Promise<Throughput> {
  const [row] = await sql<Throughput[]>`
    select count(*) filter (where metadata_enrichment_status = 'Completed')::int as completed,
           count(*) filter (where metadata_enrichment_status = 'Failed')::int as failed
    from user_books
    where metadata_enrichment_finished_at > now() - ${seconds} * interval '1 second'`;
  return row;
}

// The metadata the enricher saved, one field a row (null until Completed).
async function details(sql: Sql, job: Record<string, unknown>): Promise<JobDetail[]> {
  const [row] = await sql<{ metadata: Record<string, unknown> | null }[]>`
    select metadata from user_books where id = ${String(job.id)}`;
  return [{
    title: "Metadata",
    columns: ["Field", "Value"],
    rows: fieldRows(row?.metadata ?? {}),
  }];
}

/**
 * `<prefix>enrichment_tokens_total{kind}` (`prompt`, `completion`) and
 * `<prefix>enrichment_requests_total`: what the provider's `usage` reported, read from the tally
 * at scrape time.
 *
 * @param tally where the runs add up their tokens ({@linkcode tokensUsed} in the worker).
 */
export function tokenMetrics(registry: Registry, prefix: string, tally: TokenTally = tokensUsed) {
  const seen = { prompt: 0, completion: 0, requests: 0 };
  new Counter({
    name: `${prefix}enrichment_tokens_total`,
    help: "Tokens the enrichment provider reported used (its usage field), by kind",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      for (const kind of ["prompt", "completion"] as const) {
        this.inc({ kind }, Math.max(0, tally[kind] - seen[kind]));
        seen[kind] = Math.max(seen[kind], tally[kind]);
      }
    },
  });
  new Counter({
    name: `${prefix}enrichment_requests_total`,
    help: "Enrichment provider requests answered with a usage field",
    registers: [registry],
    collect() {
      this.inc(Math.max(0, tally.requests - seen.requests));
      seen.requests = Math.max(seen.requests, tally.requests);
    },
  });
}

/** The metadata enrichment queue's admin view. */
export const enrichmentView: QueueView = {
  name,
  consumer: "worker",
  statuses: STATUSES,
  stats,
  throughput,
  listJobs: list,
  getJob,
  retry: async (ctx, id) => retryOutcome((await retry(ctx, id)) !== null),
  cancel,
  bulkRetry,
  details,
  metrics: (registry, prefix) => tokenMetrics(registry, prefix),
};
