/**
 * HTTP routes of the enrichment queue, mounted at `/internal/enrichment` by main.ts.
 *
 * - `POST /:id/retry` (`:id` is the user book's) → 200 its enrichment, now `Pending` (admin retry:
 *   `Failed` only, attempts reset, error cleared); 409 for any other status, changing nothing; 404
 *   when no such book.
 *
 * The enrichment itself is read with `GET /internal/user-books/:id`.
 *
 * @module
 */
import { Hono } from "hono";
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { z } from "zod";
import { getJob, retry } from "./mod.ts";
import type { QueueContext } from "../../lib/queue.ts";
import { idString } from "../../lib/http/ids.ts";

const id = idString;

/**
 * Build the enrichment routes.
 *
 * @param ctx any queue context (its pool and events are used).
 * @returns a Hono router to mount under `/internal/enrichment`.
 */
export function enrichmentRoutes(ctx: QueueContext): Hono {
  const app = new Hono();
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
