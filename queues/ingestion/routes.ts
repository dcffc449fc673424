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
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { invalid, requireJson } from "../../lib/http/claim_routes.ts";
import { jobRoutes } from "../../lib/http/job_routes.ts";
import { z } from "zod";
import { type IngestionContext, name } from "./mod.ts";
import {
  bulkRetry,
  cancel,
  editionExists,
  enqueue,
  getJob,
  list,
  retry,
  STATUSES,
} from "./jobs.ts";
import { pathId } from "../../lib/http/list.ts";
import type { QueueControl } from "../../lib/control.ts";
import { readEditionSummary } from "./_fidelity.ts";
import { resolveSourceFile, resolveSourcePath } from "../../books/source_path.ts";

const id = pathId;

const enqueueBody = z.strictObject({
  source_path: z.string().min(1).max(4096),
  edition_id: z.union([id, z.number().int().positive().transform(String)]).optional(),
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

  jobRoutes(app, {
    name,
    log: ctx.log,
    statuses: STATUSES,
    base: "/jobs",
    noun: "ingestion job",
    list: {
      summary: "List ingestion jobs, newest first, by status and source path or edition",
      rows: (page) => list(ctx.sql, page),
    },
    bulkRetry: {
      summary: "Bulk admin retry: every Failed job matching the filter → Queued (at most 10,000)",
      run: (filter, dryRun) => bulkRetry(ctx, filter, dryRun),
    },
    cancel: {
      summary:
        "Admin cancel: a Queued job → Failed; a Processing job's run is stopped, then Failed",
      run: (jobId) => cancel(ctx, jobId, control),
    },
    read: {
      summary: "Read an ingestion job, with its edition summary once it has one",
      responses: { 200: "The job and `edition` (null before it has one)", 404: "No such job" },
      run: async (jobId) => {
        const job = await getJob(ctx, jobId);
        if (!job) return null;
        // The edition as the job left it: what a reader will see, and what was imperfect.
        const edition = job.edition_id ? await readEditionSummary(ctx.sql, job.edition_id) : null;
        return { ...job, edition };
      },
    },
    retry: {
      summary: "Admin retry: Failed → Queued, attempts reset, error cleared",
      run: async (jobId) => {
        const job = await retry(ctx, jobId);
        if (job) return { outcome: "retried", job };
        const current = await getJob(ctx, jobId);
        return current ? { outcome: "refused", status: current.status } : { outcome: "absent" };
      },
    },
  });

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

  return app;
}
