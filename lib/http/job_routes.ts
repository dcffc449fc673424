/**
 * The operator's routes every queue has, over the queue's own statements: list (keyset pages),
 * bulk retry, cancel, and where the queue has them, read and admin retry
 * ({@linkcode jobRoutes}). Their validation, OpenAPI descriptions and JSON error bodies are
 * written here once; each queue passes its own `jobs.ts` functions and its words (ADR-022: no
 * generic layer guesses at tables, so nothing here names one).
 *
 * @module
 */
import type { Hono } from "hono";
import type { Logger } from "../log.ts";
import type { BulkRetryOutcome, CancelOutcome, JobFilter, JobListPage } from "../queue.ts";
import { describeRoute, zValidator } from "./openapi.ts";
import { id as idSchema, idParam } from "./ids.ts";
import { invalid, requireJson } from "./claim_routes.ts";
import {
  BULK_RETRY_RESPONSES,
  bulkRetryAnswer,
  bulkRetryBody,
  CANCEL_RESPONSES,
  cancelAnswer,
  decodeCursor,
  LIST_RESPONSES,
  listAnswer,
  listQuery,
} from "./list.ts";

/**
 * Query of a host-polled queue's list: `?status=&q=&limit=&cursor=` as every queue's list takes
 * it (lib/http/list.ts), and `before` (an id: the `next` of the previous page), which the host
 * queues' lists took first.
 */
export function keysetListQuery<S extends readonly [string, ...string[]]>(statuses: S) {
  return listQuery(statuses).extend({ before: idSchema.optional() });
}

/**
 * What an admin retry route answers: 200 the job; 404 (`absent`); 409 `{ error, status }` when
 * the job is not `Failed` or the queue's own rule refuses it now (`error` then says why; else
 * "only Failed jobs can be retried").
 */
export type RetryAnswer =
  | { readonly outcome: "retried"; readonly job: unknown }
  | { readonly outcome: "absent" }
  | { readonly outcome: "refused"; readonly status: string | null; readonly error?: string };

/** A route's summary and documented responses (lib/http/openapi.ts `describeRoute`). */
interface Doc {
  readonly summary: string;
  readonly responses?: Record<number, string>;
}

/** What {@linkcode jobRoutes} needs of a queue: its own statements and words. */
export interface JobRoutes<R extends { status: string | null }> {
  /** The queue's name, for the bulk retry's log line. */
  readonly name: string;
  readonly log: Logger;
  /** Its status names (the list's `status` filter). */
  readonly statuses: readonly [string, ...string[]];
  /**
   * Where the jobs are under the router: `/jobs` (`GET /jobs`, `POST /jobs/:id/cancel`, …), or
   * `""` for the router's own root (`GET /`, `POST /retry`, `POST /:id/cancel`, …).
   */
  readonly base: "/jobs" | "";
  /**
   * The `:id` segment's route pattern, e.g. `{[0-9]+}` (digits only, so a wrong method on a
   * literal sibling such as `claim` is 405 rather than a 400 for its id); none by default.
   */
  readonly idPattern?: string;
  /** Names the job in the 404 and 409 bodies, e.g. `ingestion job`, `user book`. */
  readonly noun: string;
  /**
   * A host-polled queue's list: it also takes `before` (an id) and answers `next`, the next
   * page's `before`, beside `next_cursor`, as its list first answered.
   */
  readonly before?: boolean;
  /** A page of jobs, newest first (the queue's `list`, read with `limit + 1` rows). */
  readonly list: Doc & { rows(page: JobListPage): Promise<readonly { id: string }[]> };
  /** The queue's bulk retry under its own rule. */
  readonly bulkRetry: Doc & {
    run(filter: JobFilter, dryRun: boolean): Promise<BulkRetryOutcome>;
  };
  /** The queue's cancel of the job `:id` names. */
  readonly cancel: Doc & { run(id: string): Promise<CancelOutcome<R>> };
  /** The job `:id` names as the route shows it; null when there is none (404). */
  readonly read?: Doc & { run(id: string): Promise<unknown | null> };
  /**
   * The queue's admin retry of the job `:id` names; `noun` names it in the 404 where that is
   * not {@linkcode JobRoutes.noun}.
   */
  readonly retry?: Doc & { readonly noun?: string; run(id: string): Promise<RetryAnswer> };
}

/**
 * Register a queue's operator routes on `app`, in this order: `GET <base>` (list: `{ jobs,
 * next_cursor }`, and `next` with {@linkcode JobRoutes.before}), `POST <base>/retry` (bulk retry: a
 * JSON body only, 415 otherwise; `dry_run` counts first; logged as `bulk retry` unless a dry run), `POST <base>/:id/cancel`
 * (lib/http/list.ts `cancelAnswer`), then `GET <base>/:id` and `POST <base>/:id/retry` where the
 * queue has them. Bad input is a 400 naming the field (claim_routes.ts `invalid`).
 *
 * @param app the queue's router.
 * @param queue the queue's statements and words.
 */
export function jobRoutes<R extends { status: string | null }>(
  app: Hono,
  queue: JobRoutes<R>,
): void {
  const { base, noun } = queue;
  const item = `${base}/:id${queue.idPattern ?? ""}`;
  const byId = zValidator("param", idParam, invalid);

  if (queue.before) {
    const listDoc = describeRoute({
      summary: queue.list.summary,
      responses: queue.list.responses ?? {
        200: "`{ jobs, next_cursor, next }`: `next_cursor` is the `cursor` of the next page, " +
          "`next` its `before` (both null on the last page)",
      },
    });
    const query = keysetListQuery(queue.statuses);
    app.get(base || "/", listDoc, zValidator("query", query, invalid), async (c) => {
      const { cursor, before, limit, ...filter } = c.req.valid("query");
      const beforeId = (cursor ? decodeCursor(cursor) : null) ?? before;
      const rows = await queue.list.rows({ ...filter, beforeId, limit: limit + 1 });
      const page = listAnswer(rows, limit);
      const next = page.next_cursor ? page.jobs[page.jobs.length - 1].id : null;
      return c.json({ ...page, next });
    });
  } else {
    const listDoc = describeRoute({
      summary: queue.list.summary,
      responses: queue.list.responses ?? LIST_RESPONSES,
    });
    const query = listQuery(queue.statuses);
    app.get(base || "/", listDoc, zValidator("query", query, invalid), async (c) => {
      const { cursor, limit, ...filter } = c.req.valid("query");
      const beforeId = cursor ? decodeCursor(cursor) ?? undefined : undefined;
      const rows = await queue.list.rows({ ...filter, beforeId, limit: limit + 1 });
      return c.json(listAnswer(rows, limit));
    });
  }

  const bulkDoc = describeRoute({
    summary: queue.bulkRetry.summary,
    responses: queue.bulkRetry.responses ?? BULK_RETRY_RESPONSES,
  });
  app.post(
    `${base}/retry`,
    bulkDoc,
    requireJson,
    zValidator("json", bulkRetryBody, invalid),
    async (c) => {
      const { dry_run, ...filter } = c.req.valid("json");
      const outcome = await queue.bulkRetry.run(filter, dry_run);
      if (!dry_run) {
        queue.log.info({ queue: queue.name, ...filter, retried: outcome.retried }, "bulk retry");
      }
      return bulkRetryAnswer(c, outcome, dry_run);
    },
  );

  const cancelDoc = describeRoute({
    summary: queue.cancel.summary,
    responses: queue.cancel.responses ?? CANCEL_RESPONSES,
  });
  app.post(`${item}/cancel`, cancelDoc, byId, async (c) => {
    const jobId = c.req.valid("param").id;
    return cancelAnswer(c, await queue.cancel.run(jobId), noun, jobId);
  });

  const read = queue.read;
  if (read) {
    const readDoc = describeRoute({
      summary: read.summary,
      responses: read.responses ?? { 200: "The job", 404: "No such job" },
    });
    app.get(item, readDoc, byId, async (c) => {
      const job = await read.run(c.req.valid("param").id);
      return job ? c.json(job) : c.json({ error: `No such ${noun}` }, 404);
    });
  }

  const retry = queue.retry;
  if (retry) {
    const retryDoc = describeRoute({
      summary: retry.summary,
      responses: retry.responses ??
        { 200: "The job, now Queued", 404: "No such job", 409: "The job is not Failed" },
    });
    app.post(`${item}/retry`, retryDoc, byId, async (c) => {
      const jobId = c.req.valid("param").id;
      const retried = await retry.run(jobId);
      switch (retried.outcome) {
        case "retried":
          return c.json(retried.job);
        case "absent":
          return c.json({ error: `No such ${retry.noun ?? noun}` }, 404);
        case "refused":
          return c.json({
            error: retried.error ??
              `Cannot retry job ${jobId}: it is ${retried.status}; only Failed jobs can be retried`,
            status: retried.status,
          }, 409);
      }
    });
  }
}
