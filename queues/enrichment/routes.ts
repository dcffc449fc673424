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
import { jobRoutes } from "../../lib/http/job_routes.ts";
import { getJob, name, retry } from "./mod.ts";
import { bulkRetry, cancel, list, STATUSES } from "./jobs.ts";
import type { QueueContext } from "../../lib/queue.ts";
import type { QueueControl } from "../../lib/control.ts";

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

  jobRoutes(app, {
    name,
    log: ctx.log,
    statuses: STATUSES,
    base: "",
    noun: "enrichment of user book",
    list: {
      summary: "List the books in the enrichment queue, newest first, by status and title",
      rows: (page) => list(ctx.sql, page),
    },
    bulkRetry: {
      summary: "Bulk admin retry: every Failed enrichment matching the filter → Pending",
      run: (filter, dryRun) => bulkRetry(ctx, filter, dryRun),
    },
    cancel: {
      summary: "Admin cancel of a book's enrichment: Pending → Failed; a Running one is stopped",
      run: (bookId) => cancel(ctx, bookId, control),
    },
    retry: {
      summary: "Admin retry of a user book's enrichment: Failed → Pending, attempts reset",
      responses: {
        200: "The book's enrichment, now Pending",
        404: "No such user book",
        409: "The enrichment is not Failed",
      },
      noun: "user book",
      run: async (bookId) => {
        const retried = await retry(ctx, bookId);
        if (retried) return { outcome: "retried", job: retried };
        const current = await getJob(ctx, bookId);
        if (!current) return { outcome: "absent" };
        return {
          outcome: "refused",
          status: current.status,
          error: `Cannot retry the enrichment of user book ${bookId}: it is ${
            current.status ?? "not started"
          }; only Failed enrichments can be retried`,
        };
      },
    },
  });
  return app;
}
