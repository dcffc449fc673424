/**
 * HTTP routes of the enrichment queue, mounted at `/internal/enrichment` by main.ts.
 *
 * - `POST /:id/retry` (`:id` is the user book's) → 200 its enrichment, now `Pending` (admin retry:
 *   `Failed` only, attempts reset, error cleared); 409 for any other status, changing nothing; 404
 *   when no such book.
 *
 * - `GET /?status=&q=&limit=&cursor=` → 200 `{ jobs, next_cursor }`: the books in the queue,
 *   newest first; `q` searches the title and the book's id.
 * - `POST /:id/cancel` → the admin cancel of the book's enrichment (lib/http/list.ts
 *   `cancelAnswer`).
 * - `POST /retry` `{ "status": "Failed", "q"?, "dry_run"? }` → 200 the bulk retry's outcome.
 *
 * One book's enrichment is read with `GET /internal/user-books/:id`.
 *
 * @module
 */
import { Hono } from "hono";
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { invalid } from "../../lib/http/claim_routes.ts";
import { z } from "zod";
import { getJob, retry } from "./mod.ts";
import { bulkRetry, cancel, list } from "./jobs.ts";
import type { QueueContext } from "../../lib/queue.ts";
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

/**
 * Build the enrichment routes.
 *
 * @param ctx any queue context (its pool and events are used).
 * @param control where a cancel of a running enrichment is sent (lib/control.ts).
 * @returns a Hono router to mount under `/internal/enrichment`.
 */
export function enrichmentRoutes(
  ctx: QueueContext,
  control: Pick<QueueControl, "requestCancel">,
): Hono {
  const app = new Hono();

  const query = listQuery(["Pending", "Running", "Completed", "Failed"]);
  app.get(
    "/",
    describeRoute({
      summary: "List the books in the enrichment queue, newest first, by status and title",
      responses: LIST_RESPONSES,
    }),
    zValidator("query", query, invalid),
    async (c) => {
      const { cursor, limit, ...filter } = c.req.valid("query");
      const beforeId = cursor ? decodeCursor(cursor) ?? undefined : undefined;
      const rows = await list(ctx.sql, { ...filter, beforeId, limit: limit + 1 });
      return c.json(listAnswer(rows, limit));
    },
  );

  app.post(
    "/retry",
    describeRoute({
      summary: "Bulk admin retry: every Failed enrichment matching the filter → Pending",
      responses: BULK_RETRY_RESPONSES,
    }),
    zValidator("json", bulkRetryBody, invalid),
    async (c) => {
      const { dry_run, ...filter } = c.req.valid("json");
      const outcome = await bulkRetry(ctx, filter, dry_run);
      if (!dry_run) {
        ctx.log.info({ queue: "enrichment", ...filter, retried: outcome.retried }, "bulk retry");
      }
      return bulkRetryAnswer(c, outcome, dry_run);
    },
  );

  app.post(
    "/:id/cancel",
    describeRoute({
      summary: "Admin cancel of a book's enrichment: Pending → Failed; a Running one is stopped",
      responses: CANCEL_RESPONSES,
    }),
    zValidator("param", z.object({ id }), invalid),
    async (c) => {
      const bookId = c.req.valid("param").id;
      const outcome = await cancel(ctx, bookId, (q, i) => control.requestCancel(q, i));
      return cancelAnswer(c, outcome, "enrichment of user book", bookId);
    },
  );
  app.post(
    "/:id/retry",
    describeRoute({
      summary: "Admin retry of a user book's enrichment: Failed → Pending, attempts reset",
      responses: {
        200: "The book's enrichment, now Pending",
        404: "No such user book",
        409: "The enrichment is not Failed",
      },
    }),
    zValidator("param", z.object({ id }), (result) => {
      if (result.success) return undefined;
      return Response.json({ error: `Invalid id: ${result.error.issues[0].message}` }, {
        status: 400,
      });
    }),
    async (c) => {
      const bookId = c.req.valid("param").id;
      const retried = await retry(ctx, bookId);
      if (retried) return c.json(retried);
      const current = await getJob(ctx, bookId);
      if (!current) return c.json({ error: "No such user book" }, 404);
      return c.json({
        error: `Cannot retry the enrichment of user book ${bookId}: it is ${
          current.status ?? "not started"
        }; only Failed enrichments can be retried`,
        status: current.status,
      }, 409);
    },
  );
  return app;
}
