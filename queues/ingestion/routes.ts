/**
 * HTTP routes of the ingestion queue, mounted at `/internal/ingestion` by main.ts (behind the
 * bearer token and body limit of lib/http/api.ts).
 *
 * - `POST /jobs` `{ "source_path": "books/moby.epub", "edition_id"?: "12" }` → 201 the job.
 *   `source_path` is relative to `STORAGE_DIR`; one resolving outside it is a 400.
 * - `GET /jobs/:id` → 200 the job with `edition`: `{ id, title, author, format, language,
 *   direction, warnings, chapter_count, resource_count }` or `null` before it has one; 404 when
 *   unknown.
 * - `POST /jobs/:id/retry` → 200 the job, now `Queued` (admin retry: `Failed` only); 409 for any
 *   other status, changing nothing; 404 when unknown.
 * - `GET /jobs?status=&q=&limit=&cursor=` → 200 `{ jobs, next_cursor }`, newest first; `q` searches
 *   the source path, the edition id and its title.
 * - `POST /jobs/:id/cancel` → 200 the job, `Failed` (cancelled by admin); 202 while a running job's
 *   run stops; 409 for a finished job; 404 (lib/http/list.ts `cancelAnswer`).
 * - `POST /jobs/retry` `{ "status": "Failed", "q"?: "…", "dry_run"?: true }` → 200 what the bulk
 *   retry matched and re-queued (at most 10,000; lib/queue.ts `BulkRetryOutcome`).
 *
 * @module
 */
import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { invalid } from "../../lib/http/claim_routes.ts";
import { z } from "zod";
import { type IngestionContext } from "./mod.ts";
import { bulkRetry, cancel, editionExists, enqueue, getJob, list, retry } from "./jobs.ts";
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
import type { QueueControl } from "../../lib/control.ts";
import { readEditionSummary } from "./_fidelity.ts";
import { resolveSourceFile, resolveSourcePath } from "../../books/source_path.ts";

const id = pathId;

const enqueueBody = z.strictObject({
  source_path: z.string().min(1).max(4096),
  edition_id: z.union([id, z.number().int().positive().transform(String)]).optional(),
});

// Without this, a body sent as text/plain would be read as `{}` and the error would blame a
// missing field instead of the header.
const requireJson = createMiddleware(async (c, next) => {
  if (!/^application\/([\w.+-]*\+)?json\b/i.test(c.req.header("content-type") ?? "")) {
    return c.json({ error: "Expected Content-Type: application/json" }, 415);
  }
  return await next();
});

/**
 * Build the ingestion routes.
 *
 * @param ctx the ingestion queue's context (pool, storage root, events).
 * @param control where a cancel of a running job is sent (lib/control.ts).
 * @returns a Hono router to mount under `/internal/ingestion`.
 */
export function ingestionRoutes(
  ctx: IngestionContext,
  control: Pick<QueueControl, "requestCancel">,
): Hono {
  const app = new Hono();

  const listDoc = describeRoute({
    summary: "List ingestion jobs, newest first, by status and source path or edition",
    responses: LIST_RESPONSES,
  });
  const query = listQuery(["Queued", "Processing", "Completed", "Failed"]);
  app.get("/jobs", listDoc, zValidator("query", query, invalid), async (c) => {
    const { cursor, limit, ...filter } = c.req.valid("query");
    const beforeId = cursor ? decodeCursor(cursor) ?? undefined : undefined;
    return c.json(
      listAnswer(await list(ctx.sql, { ...filter, beforeId, limit: limit + 1 }), limit),
    );
  });

  const bulkDoc = describeRoute({
    summary: "Bulk admin retry: every Failed job matching the filter → Queued (at most 10,000)",
    responses: BULK_RETRY_RESPONSES,
  });
  app.post(
    "/jobs/retry",
    bulkDoc,
    requireJson,
    zValidator("json", bulkRetryBody, invalid),
    async (c) => {
      const { dry_run, ...filter } = c.req.valid("json");
      const outcome = await bulkRetry(ctx, filter, dry_run);
      if (!dry_run) {
        ctx.log.info({ queue: "ingestion", ...filter, retried: outcome.retried }, "bulk retry");
      }
      return bulkRetryAnswer(c, outcome, dry_run);
    },
  );

  const enqueueDoc = describeRoute({
    summary: "Enqueue a book file for ingestion",
    responses: {
      201: "The new job, Queued",
      400: "Invalid body, or source_path outside STORAGE_DIR, missing, not a regular file",
      415: "Content-Type is not application/json",
    },
  });
  app.post(
    "/jobs",
    enqueueDoc,
    requireJson,
    zValidator("json", enqueueBody, invalid),
    async (c) => {
      const body = c.req.valid("json");
      const refuse = (why: string) =>
        c.json({ error: `Cannot use source_path "${body.source_path}": ${why}` }, 400);
      let sourcePath: string;
      let info: Deno.FileInfo;
      try {
        sourcePath = resolveSourcePath(ctx.storageDir, body.source_path);
        info = await Deno.stat(await resolveSourceFile(ctx.storageDir, sourcePath));
      } catch (err) {
        if (err instanceof RangeError) return c.json({ error: err.message }, 400);
        if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) {
          return refuse("no such file in STORAGE_DIR");
        }
        throw err;
      }
      // A FIFO or a device could block the one sequential consumer or never end.
      if (!info.isFile) return refuse("it is not a regular file");
      const editionId = body.edition_id ?? null;
      if (editionId && !(await editionExists(ctx, editionId))) {
        return c.json({ error: `Cannot re-ingest edition ${editionId}: no such edition` }, 400);
      }
      return c.json(await enqueue(ctx, sourcePath, editionId), 201);
    },
  );

  const readDoc = describeRoute({
    summary: "Read an ingestion job, with its edition summary once it has one",
    responses: { 200: "The job and `edition` (null before it has one)", 404: "No such job" },
  });
  app.get("/jobs/:id", readDoc, zValidator("param", z.object({ id }), invalid), async (c) => {
    const job = await getJob(ctx, c.req.valid("param").id);
    if (!job) return c.json({ error: "No such ingestion job" }, 404);
    // The edition as the job left it: what a reader will see, and what was imperfect.
    const edition = job.edition_id ? await readEditionSummary(ctx.sql, job.edition_id) : null;
    return c.json({ ...job, edition });
  });

  const retryDoc = describeRoute({
    summary: "Admin retry: Failed → Queued, attempts reset, error cleared",
    responses: { 200: "The job, now Queued", 404: "No such job", 409: "The job is not Failed" },
  });
  app.post(
    "/jobs/:id/retry",
    retryDoc,
    zValidator("param", z.object({ id }), invalid),
    async (c) => {
      const jobId = c.req.valid("param").id;
      const job = await retry(ctx, jobId);
      if (job) return c.json(job);
      const current = await getJob(ctx, jobId);
      if (!current) return c.json({ error: "No such ingestion job" }, 404);
      return c.json({
        error:
          `Cannot retry job ${jobId}: it is ${current.status}; only Failed jobs can be retried`,
        status: current.status,
      }, 409);
    },
  );

  const cancelDoc = describeRoute({
    summary: "Admin cancel: a Queued job → Failed; a Processing job's run is stopped, then Failed",
    responses: CANCEL_RESPONSES,
  });
  app.post(
    "/jobs/:id/cancel",
    cancelDoc,
    zValidator("param", z.object({ id }), invalid),
    async (c) => {
      const jobId = c.req.valid("param").id;
      const outcome = await cancel(ctx, jobId, (queue, id) => control.requestCancel(queue, id));
      return cancelAnswer(c, outcome, "ingestion job", jobId);
    },
  );

  return app;
}
