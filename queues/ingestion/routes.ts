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
 *
 * @module
 */
import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { z } from "zod";
import { editionExists, enqueue, getJob, type IngestionContext, retry } from "./mod.ts";
import { readEditionSummary } from "./fidelity.ts";
import { resolveSourceFile, resolveSourcePath } from "../../books/source_path.ts";
import { idString } from "../../lib/http/ids.ts";

// Every id enqueue can hand out: 1 to the bigint maximum (lib/http/ids.ts).
const id = idString;

const enqueueBody = z.strictObject({
  source_path: z.string().min(1).max(4096),
  edition_id: z.union([id, z.number().int().positive().transform(String)]).optional(),
});

// Bad input is a 4xx JSON error that names the field (STYLE.md §7), never zod's raw dump.
interface Checked {
  success: boolean;
  error?: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> };
}

function invalid(result: Checked): Response | undefined {
  if (result.success || !result.error) return undefined;
  const issue = result.error.issues[0];
  const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "body";
  return Response.json({ error: `Invalid ${where}: ${issue.message}` }, { status: 400 });
}

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
 * @returns a Hono router to mount under `/internal/ingestion`.
 */
export function ingestionRoutes(ctx: IngestionContext): Hono {
  const app = new Hono();

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
    // The edition as the job left it: what a reader will see, and what was imperfect (issue 10).
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

  return app;
}
