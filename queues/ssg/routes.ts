/**
 * HTTP routes of the static-site rebuild queue and of publishing, mounted by main.ts behind the
 * bearer token and body limit of lib/http/api.ts.
 *
 * Under `/internal/ssg` ({@linkcode ssgRoutes}):
 * - `POST /rebuild-all` (no body) → 200 the Full job already `Queued` or `Running`, or 201 a new
 *   `Queued` one (ADR-022 row 4).
 * - `GET /jobs/:id` → 200 the job, 404 when unknown.
 * - `POST /jobs/:id/retry` → 200 the job, now `Queued` (admin retry: `Failed` only); 409 for any
 *   other status or while another Full job is `Queued`, changing nothing; 404 when unknown.
 * - `GET /jobs?status=&q=&limit=&cursor=` → 200 `{ jobs, next_cursor }`, newest first.
 * - `POST /jobs/:id/cancel` → the admin cancel (lib/http/list.ts `cancelAnswer`).
 * - `POST /jobs/retry` `{ "status": "Failed", "q"?, "dry_run"? }` → 200 the bulk retry's outcome
 *   (the newest matching job only: one Full rebuild renders everything).
 *
 * Under `/internal/editions` ({@linkcode editionRoutes}):
 * - `POST /:id/publish`, `POST /:id/unpublish` → 200 `{ edition: { id, published_at }, rebuild }`
 *   — the write and its queued Full rebuild commit together ({@linkcode publishEdition}); 404
 *   for an unknown edition.
 *
 * @module
 */
import { Hono } from "hono";
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { invalid as invalidInput } from "../../lib/http/claim_routes.ts";
import { z } from "zod";
import { transaction } from "../../lib/db.ts";
import type { QueueContext } from "../../lib/queue.ts";

import { bulkRetry, cancel, getJob, list, publishEdition, requestRebuild, retry } from "./jobs.ts";
import type { QueueControl } from "../../lib/control.ts";
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
  pathId,
} from "../../lib/http/list.ts";

const id = pathId;
const params = z.object({ id });

/**
 * Build the rebuild routes.
 *
 * @param control where a cancel of a running render is sent (lib/control.ts).
 * @returns a Hono router to mount under `/internal/ssg`.
 */
export function ssgRoutes(ctx: QueueContext, control: Pick<QueueControl, "requestCancel">): Hono {
  const app = new Hono();

  const query = listQuery(["Queued", "Running", "Completed", "Failed"]);
  app.get(
    "/jobs",
    describeRoute({ summary: "List site rebuild jobs, newest first", responses: LIST_RESPONSES }),
    zValidator("query", query, invalidInput),
    async (c) => {
      const { cursor, limit, ...filter } = c.req.valid("query");
      const beforeId = cursor ? decodeCursor(cursor) ?? undefined : undefined;
      const rows = await list(ctx.sql, { ...filter, beforeId, limit: limit + 1 });
      return c.json(listAnswer(rows, limit));
    },
  );

  app.post(
    "/jobs/retry",
    describeRoute({
      summary: "Bulk admin retry: the newest matching Failed rebuild → Queued (one renders all)",
      responses: BULK_RETRY_RESPONSES,
    }),
    zValidator("json", bulkRetryBody, invalidInput),
    async (c) => {
      const { dry_run, ...filter } = c.req.valid("json");
      const outcome = await bulkRetry(ctx, filter, dry_run);
      if (!dry_run) {
        ctx.log.info({ queue: "ssg", ...filter, retried: outcome.retried }, "bulk retry");
      }
      return bulkRetryAnswer(c, outcome, dry_run);
    },
  );

  app.post(
    "/jobs/:id/cancel",
    describeRoute({
      summary: "Admin cancel: a Queued rebuild → Failed; a Running render is stopped, then Failed",
      responses: CANCEL_RESPONSES,
    }),
    zValidator("param", params, invalidInput),
    async (c) => {
      const jobId = c.req.valid("param").id;
      const outcome = await cancel(ctx, jobId, (q, i) => control.requestCancel(q, i));
      return cancelAnswer(c, outcome, "ssg job", jobId);
    },
  );

  const rebuildDoc = describeRoute({
    summary: "Ask for a Full site rebuild (the one in flight, or a new Queued one)",
    responses: { 200: "The Full job already Queued or Running", 201: "A new Queued Full job" },
  });
  app.post("/rebuild-all", rebuildDoc, async (c) => {
    const { job, created } = await requestRebuild(ctx);
    return c.json(job, created ? 201 : 200);
  });

  const readDoc = describeRoute({
    summary: "Read a site rebuild job",
    responses: { 200: "The job", 404: "No such job" },
  });
  app.get("/jobs/:id", readDoc, zValidator("param", params, invalidInput), async (c) => {
    const job = await getJob(ctx, c.req.valid("param").id);
    return job ? c.json(job) : c.json({ error: "No such ssg job" }, 404);
  });

  const retryDoc = describeRoute({
    summary: "Admin retry: Failed → Queued, attempts reset, error cleared",
    responses: {
      200: "The job, now Queued",
      404: "No such job",
      409: "The job is not Failed, or another Full job is already Queued",
    },
  });
  app.post("/jobs/:id/retry", retryDoc, zValidator("param", params, invalidInput), async (c) => {
    const jobId = c.req.valid("param").id;
    const job = await retry(ctx, jobId);
    if (job) return c.json(job);
    const current = await getJob(ctx, jobId);
    if (!current) return c.json({ error: "No such ssg job" }, 404);
    if (current.status === "Failed") {
      return c.json({
        error: `Cannot retry job ${jobId}: a Full rebuild is already Queued and will render ` +
          "every published edition",
        status: current.status,
      }, 409);
    }
    return c.json({
      error: `Cannot retry job ${jobId}: it is ${current.status}; only Failed jobs can be retried`,
      status: current.status,
    }, 409);
  });

  return app;
}

/**
 * Build the admin publish routes.
 *
 * @returns a Hono router to mount under `/internal/editions`.
 */
export function editionRoutes(ctx: QueueContext): Hono {
  const app = new Hono();
  for (const [action, published] of [["publish", true], ["unpublish", false]] as const) {
    const doc = describeRoute({
      summary: published
        ? "Publish an edition and queue the Full rebuild that shows it, in one transaction"
        : "Unpublish an edition and queue the Full rebuild that removes it, in one transaction",
      responses: { 200: "`{ edition: { id, published_at }, rebuild }`", 404: "No such edition" },
    });
    app.post(`/:id/${action}`, doc, zValidator("param", params, invalidInput), async (c) => {
      const editionId = c.req.valid("param").id;
      const result = await transaction(
        ctx.sql,
        ctx.log,
        (tx) => publishEdition(tx.sql, editionId, published),
      );
      if (!result) return c.json({ error: `No such edition: ${editionId}` }, 404);
      return c.json({
        edition: { id: editionId, published_at: result.published_at },
        rebuild: result.rebuild,
      });
    });
  }
  return app;
}
