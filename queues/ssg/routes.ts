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
import { transaction } from "../../lib/db.ts";
import type { QueueContext } from "../../lib/queue.ts";
import { jobRoutes } from "../../lib/http/job_routes.ts";
import { idParam } from "../../lib/http/ids.ts";
import { name } from "./mod.ts";
import {
  bulkRetry,
  cancel,
  getJob,
  list,
  publishEdition,
  requestRebuild,
  retry,
  STATUSES,
} from "./jobs.ts";
import type { QueueControl } from "../../lib/control.ts";

/**
 * Build the rebuild routes.
 *
 * @param control where a cancel of a running render is sent (lib/control.ts).
 * @returns a Hono router to mount under `/internal/ssg`.
 */
export function ssgRoutes(ctx: QueueContext, control: Pick<QueueControl, "requestCancel">): Hono {
  const app = new Hono();

  jobRoutes(app, {
    name,
    log: ctx.log,
    statuses: STATUSES,
    base: "/jobs",
    noun: "ssg job",
    list: { summary: "List site rebuild jobs, newest first", rows: (page) => list(ctx.sql, page) },
    bulkRetry: {
      summary: "Bulk admin retry: the newest matching Failed rebuild → Queued (one renders all)",
      run: (filter, dryRun) => bulkRetry(ctx, filter, dryRun),
    },
    cancel: {
      summary: "Admin cancel: a Queued rebuild → Failed; a Running render is stopped, then Failed",
      run: (jobId) => cancel(ctx, jobId, control),
    },
    read: { summary: "Read a site rebuild job", run: (jobId) => getJob(ctx, jobId) },
    retry: {
      summary: "Admin retry: Failed → Queued, attempts reset, error cleared",
      responses: {
        200: "The job, now Queued",
        404: "No such job",
        409: "The job is not Failed, or another Full job is already Queued",
      },
      run: async (jobId) => {
        const job = await retry(ctx, jobId);
        if (job) return { outcome: "retried", job };
        const current = await getJob(ctx, jobId);
        if (!current) return { outcome: "absent" };
        if (current.status !== "Failed") return { outcome: "refused", status: current.status };
        return {
          outcome: "refused",
          status: current.status,
          error: `Cannot retry job ${jobId}: a Full rebuild is already Queued and will render ` +
            "every published edition",
        };
      },
    },
  });

  const rebuildDoc = describeRoute({
    summary: "Ask for a Full site rebuild (the one in flight, or a new Queued one)",
    responses: { 200: "The Full job already Queued or Running", 201: "A new Queued Full job" },
  });
  app.post("/rebuild-all", rebuildDoc, async (c) => {
    const { job, created } = await requestRebuild(ctx);
    return c.json(job, created ? 201 : 200);
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
    app.post(`/:id/${action}`, doc, zValidator("param", idParam, invalidInput), async (c) => {
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
