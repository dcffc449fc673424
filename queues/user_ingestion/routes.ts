/**
 * HTTP routes of the user ingestion queue, mounted at `/internal/user-books` by main.ts (behind
 * the bearer token of lib/http/api.ts; `POST /` is exempt from its 64 KiB body limit and capped by
 * `MAX_UPLOAD_BYTES` instead).
 *
 * - `POST /` multipart (`owner_id`, `file`: streamed to `STORAGE_DIR/uploads/`) or JSON
 *   `{ "owner_id": 7, "source_path": "books/x.epub" }` (a file already under `STORAGE_DIR`) →
 *   201 `{ "user_book", "job" }`, created in one transaction. `owner_id` is a positive integer,
 *   as a number or a numeric string. 400 bad input, 413 too large, 415 other content types.
 * - `GET /:id` → 200 `{ "user_book", "job", "enrichment" }`, 404 when unknown.
 * - `POST /:id/retry` → 200 the job, now `Queued` (admin retry of the book's `Failed` job); 409
 *   for any other status, changing nothing; 404 when unknown.
 * - `GET /?status=&q=&limit=&cursor=` → 200 `{ jobs, next_cursor }`: the queue's jobs, newest
 *   first, each with its book's `title` and `book_status`; `q` searches the source path, the
 *   book's id and its title.
 * - `POST /:id/cancel` → the admin cancel of the book's job (lib/http/list.ts `cancelAnswer`).
 * - `POST /retry` `{ "status": "Failed", "q"?, "dry_run"? }` → 200 the bulk retry's outcome.
 *
 * @module
 */
import { Hono } from "hono";
import { describeRoute } from "../../lib/http/openapi.ts";
import { jobRoutes } from "../../lib/http/job_routes.ts";
import { z } from "zod";
import { name, type UserIngestionContext } from "./mod.ts";
import { bulkRetry, cancel, enqueue, getUserBook, list, retry, STATUSES } from "./jobs.ts";
import type { QueueControl } from "../../lib/control.ts";
import { getJob as getEnrichment } from "../enrichment/mod.ts";
import { resolveSourceFile, resolveSourcePath } from "../../books/source_path.ts";
import { receiveUpload, removeUpload, UploadError } from "../../lib/http/multipart.ts";

const ownerId = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  z.string().regex(/^[1-9]\d{0,14}$/, "expected a positive integer").transform(Number),
], { error: "expected a positive integer, as a number or a numeric string" });

const jsonBody = z.strictObject({
  owner_id: ownerId,
  source_path: z.string().min(1).max(4096),
});

// Bad input is a 4xx JSON error that names the field (docs/development.md), never zod's raw dump.
function describe(
  error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> },
): string {
  const issue = error.issues[0];
  const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "body";
  return `Invalid ${where}: ${issue.message}`;
}

// The multipart form as the route reads it: `owner_id` checked with the same schema as the JSON
// body's, `file` streamed to disk by lib/http/multipart.ts (at most MAX_UPLOAD_BYTES).
const uploadForm = z.object({ owner_id: ownerId, file: z.file() });

/** Paths under `/internal` that the API's JSON body limit must not apply to (the upload). */
export const UNLIMITED_BODY_PATHS = ["/user-books"] as const;

/**
 * Build the user book routes.
 *
 * @param ctx the user ingestion queue's context (pool, storage root, events).
 * @param maxUploadBytes largest upload accepted, in bytes (`MAX_UPLOAD_BYTES`).
 * @param control where a cancel of a running job is sent (lib/control.ts).
 * @returns a Hono router to mount under `/internal/user-books`.
 */
export function userBookRoutes(
  ctx: UserIngestionContext,
  maxUploadBytes: number,
  control: Pick<QueueControl, "requestCancel">,
): Hono {
  const app = new Hono();

  jobRoutes(app, {
    name,
    log: ctx.log,
    statuses: STATUSES,
    base: "",
    noun: "user book",
    list: {
      summary: "List user ingestion jobs, newest first, by status and file, book id or title",
      rows: (page) => list(ctx.sql, page),
    },
    bulkRetry: {
      summary: "Bulk admin retry: every Failed job matching the filter → Queued (at most 10,000)",
      run: (filter, dryRun) => bulkRetry(ctx, filter, dryRun),
    },
    cancel: {
      summary: "Admin cancel of the book's job: Queued → Failed; a Processing run is stopped first",
      run: async (bookId) => {
        const found = await getUserBook(ctx, bookId);
        if (!found?.job) return { outcome: "absent" };
        return await cancel(ctx, found.job.id, control);
      },
    },
    read: {
      summary: "Read a user book with its latest job and its enrichment",
      responses: { 200: "`{ user_book, job, enrichment }`", 404: "No such user book" },
      run: async (bookId) => {
        const found = await getUserBook(ctx, bookId);
        return found && { ...found, enrichment: await getEnrichment(ctx, bookId) };
      },
    },
    retry: {
      summary: "Admin retry of the book's job: Failed → Queued, the book back to Processing",
      responses: {
        200: "The job, now Queued",
        404: "No such user book",
        409: "The job is not Failed",
      },
      run: async (bookId) => {
        const found = await getUserBook(ctx, bookId);
        if (!found?.job) return { outcome: "absent" };
        const job = await retry(ctx, found.job.id);
        if (job) return { outcome: "retried", job };
        const current = (await getUserBook(ctx, bookId))?.job ?? found.job;
        return {
          outcome: "refused",
          status: current.status,
          error: `Cannot retry user book ${bookId}: its job is ${current.status}; ` +
            "only Failed jobs can be retried",
        };
      },
    },
  });

  const uploadDoc = describeRoute({
    summary: "Upload a reader's book (multipart) or name a file under STORAGE_DIR (JSON)",
    responses: {
      201: "`{ user_book, job }`, created in one transaction",
      400: "Invalid owner_id or source_path",
      413: "The upload exceeds MAX_UPLOAD_BYTES",
      415: "Neither multipart/form-data nor application/json",
    },
    body: { "multipart/form-data": uploadForm, "application/json": jsonBody },
  });
  app.post("/", uploadDoc, async (c) => {
    const type = c.req.header("content-type") ?? "";
    if (/^multipart\/form-data\b/i.test(type)) {
      let upload;
      try {
        upload = await receiveUpload(c.req.raw, ctx.storageDir, maxUploadBytes);
      } catch (err) {
        // The rest of a refused body is not read: the connection ends with this answer.
        if (err instanceof UploadError) {
          return c.json({ error: err.message }, err.status, { connection: "close" });
        }
        throw err;
      }
      const owner = ownerId.safeParse(upload.fields.owner_id);
      if (!owner.success) {
        await removeUpload(upload.path);
        const why = upload.fields.owner_id === undefined
          ? "Invalid owner_id: missing"
          : `Invalid owner_id: ${owner.error.issues[0].message}`;
        return c.json({ error: why }, 400);
      }
      try {
        return c.json(await enqueue(ctx, owner.data, upload.sourcePath), 201);
      } catch (err) {
        await removeUpload(upload.path);
        throw err;
      }
    }
    if (!/^application\/([\w.+-]*\+)?json\b/i.test(type)) {
      return c.json({
        error: "Expected Content-Type: multipart/form-data (an upload) or application/json",
      }, 415);
    }
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      return c.json({ error: "Invalid body: not JSON" }, 400);
    }
    const body = jsonBody.safeParse(raw);
    if (!body.success) return c.json({ error: describe(body.error) }, 400);
    const { source_path } = body.data;
    const refuse = (why: string) =>
      c.json({ error: `Cannot use source_path "${source_path}": ${why}` }, 400);
    let sourcePath: string;
    let info: Deno.FileInfo;
    try {
      sourcePath = resolveSourcePath(ctx.storageDir, source_path);
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
    return c.json(await enqueue(ctx, body.data.owner_id, sourcePath), 201);
  });

  return app;
}
