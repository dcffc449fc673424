/**
 * A queue's admin view: what `/admin` and `/metrics` read about one queue, each answered by the
 * queue's own statements (no generic layer guesses at tables). Each queue's `queues/<queue>/view.ts`
 * exports one {@linkcode QueueView} over its `jobs.ts` (`stats(sql)`, `list`, `retry`, …). The
 * shapes those statements' rows become are here, written once: {@linkcode statsOf},
 * {@linkcode fieldRows}, {@linkcode chapterTable}.
 *
 * @module
 */
import type { Registry } from "prom-client";
import type { Sql } from "../db.ts";
import type {
  BulkRetryOutcome,
  CancelOutcome,
  JobFilter,
  JobListPage,
  QueueContext,
  QueueStats,
} from "../queue.ts";
import type { QueueControl } from "../control.ts";

/** One job as a list shows it. */
export interface JobSummary {
  /** bigint id, as a string. */
  readonly id: string;
  readonly status: string;
  readonly attempt_count: number;
  /** What the job works on, in a few words (e.g. its source path). */
  readonly subject: string;
  readonly error: string | null;
  readonly created_at: Date;
  readonly updated_at: Date;
}

/** Settled jobs over a window, counted by the queue's own statement. */
export interface Throughput {
  /** Jobs that reached `Completed` in the window. */
  readonly completed: number;
  /** Jobs that reached `Failed` in the window. */
  readonly failed: number;
}

/** A titled table of extra facts about one job (e.g. ingestion's edition chapters). */
export interface JobDetail {
  readonly title: string;
  readonly columns: readonly string[];
  readonly rows: ReadonlyArray<ReadonlyArray<string | number | null>>;
}

/**
 * Which page of a queue's jobs to list: newest first, keyset-paged on the id, by status and `q`
 * (the same statement as the queue's list route).
 */
export type JobPage = JobListPage;

/**
 * What an admin retry did: `retried`, or why not — the job is not `Failed` (`reason` says its
 * status) or the queue's own rule refuses it now (e.g. another Full rebuild is already queued).
 */
export type RetryOutcome =
  | { readonly retried: true }
  | { readonly retried: false; readonly reason: string };

/**
 * The admin view of one queue. Every statement lives with the queue (its module or its
 * `_view.ts`).
 *
 * @example
 * const views: QueueView[] = [ingestionView, ssgView];
 * const page = await views[0].listJobs(sql, { status: "Failed", limit: 50 });
 */
export interface QueueView {
  /** The queue's name, as in its events and lock, e.g. `ingestion`. */
  readonly name: string;
  /**
   * The queue's former names, still accepted wherever a name is an input (a dashboard URL), so a
   * bookmark or a script written against them keeps working; output always uses `name`.
   */
  readonly aliases?: readonly string[];
  /** Its status names, in lifecycle order (ADR-022 names; enrichment's `Pending`). */
  readonly statuses: readonly string[];
  /**
   * Who consumes it: `worker` — this process's sequential consumer under the queue lock
   * (ADR-022); `host` — a host poller through the claim API (no lock to show).
   */
  readonly consumer: "worker" | "host";
  /** Jobs by status and the oldest runnable age (the queue module's `stats(sql)`). */
  stats(sql: Sql): Promise<QueueStats>;
  /** Jobs settled in the last `seconds` (s). */
  throughput(sql: Sql, seconds: number): Promise<Throughput>;
  /** A page of jobs, newest first. */
  listJobs(sql: Sql, page: JobPage): Promise<JobSummary[]>;
  /** One job's row as the queue shows it (column → value); null when no job has that id. */
  getJob(sql: Sql, id: string): Promise<Record<string, unknown> | null>;
  /**
   * The admin retry, where the queue has one: `Failed` → runnable (ADR-022: "Failed is terminal.
   * Only an admin retry brings it back"), under the queue's own rules. Publishes the `retried`
   * event after its commit; changes nothing unless it retried.
   */
  retry?(ctx: QueueContext, id: string): Promise<RetryOutcome>;
  /**
   * The admin cancel (lib/queue.ts `CancelOutcome`): a runnable job → `Failed` (cancelled by
   * admin); a running job of an in-process queue is stopped through `control`; a running
   * host-polled job is refused.
   */
  cancel?(
    ctx: QueueContext,
    id: string,
    control: Pick<QueueControl, "requestCancel">,
  ): Promise<CancelOutcome<unknown>>;
  /** The bulk admin retry of every `Failed` job matching `filter` (one statement, bounded). */
  bulkRetry?(ctx: QueueContext, filter: JobFilter, dryRun: boolean): Promise<BulkRetryOutcome>;
  /** Extra tables for a job's page (e.g. ingestion's chapters); none when absent. */
  details?(sql: Sql, job: Record<string, unknown>): Promise<JobDetail[]>;
  /**
   * How many breakers of the queue are open now, where it has one (auto-publish: editions with
   * 5 `Failed` jobs in 24 h, ADR-022 row 5); counted in the background with the stats.
   */
  openBreakers?(sql: Sql): Promise<number>;
  /**
   * The queue's own series beyond the shared ones, where it has some (enrichment: tokens used),
   * registered on the metrics registry; names start with `prefix`.
   */
  metrics?(registry: Registry, prefix: string): void;
}

/** The one status an admin retry accepts (ADR-022): the dashboard offers retry for it alone. */
export const RETRYABLE_STATUS = "Failed";

/**
 * The usual retry outcome of a queue whose retry returns the row or null: retried, else the job
 * is not `Failed` (or is gone).
 *
 * @param retried whether the queue's retry changed the row.
 * @returns the outcome for {@linkcode QueueView.retry}.
 */
export function retryOutcome(retried: boolean): RetryOutcome {
  return retried
    ? { retried: true }
    : { retried: false, reason: "only Failed jobs can be retried" };
}

/**
 * What a queue's `stats(sql)` statement returns: its jobs counted by status (null when the queue
 * has none), and the age in seconds of the oldest runnable one (null when none is).
 */
export interface StatsRow {
  readonly by_status: Record<string, number> | null;
  readonly oldest_s: number | null;
}

/**
 * A queue's {@linkcode QueueStats} from its stats statement: every one of `statuses` present, in
 * that order (0 when it has no rows), then any other status the rows name.
 *
 * @param statuses the queue's status names, in lifecycle order.
 */
export function statsOf(statuses: readonly string[], row: StatsRow): QueueStats {
  const byStatus: Record<string, number> = Object.fromEntries(statuses.map((s) => [s, 0]));
  Object.assign(byStatus, row.by_status ?? {});
  return { byStatus, oldestRunnableAgeS: row.oldest_s };
}

/**
 * A record's fields as a detail table's rows (`[field, value]`, a non-string value as JSON), e.g.
 * the metadata an enrichment saved.
 */
export function fieldRows(record: Record<string, unknown>): [string, string][] {
  return Object.entries(record).map((
    [field, value],
  ) => [field, typeof value === "string" ? value : JSON.stringify(value)]);
}

/** One chapter of a book as a detail table shows it: its position, title and HTML size (bytes). */
export interface ChapterSize {
  readonly position: number;
  readonly title: string;
  readonly bytes: number;
}

/** A book's chapters by position, as a detail table titled `title`. */
export function chapterTable(title: string, chapters: readonly ChapterSize[]): JobDetail {
  return {
    title,
    columns: ["#", "Chapter", "HTML bytes"],
    rows: chapters.map((c) => [c.position, c.title, c.bytes]),
  };
}
