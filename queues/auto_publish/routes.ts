/**
 * The auto-publish queue's claim API, mounted at `/internal/auto-publish` by main.ts (behind the
 * bearer token and body limit of lib/http/api.ts). The host poller `host/seo-publish-poll.sh` is its
 * client; the diagram of states and verbs is in queues/auto_publish/mod.ts.
 *
 * - `POST /jobs` `{ "edition_id": "12", "priority"?: 0 }` → 201 the job; 409 while the edition has
 *   a `Queued`/`Running` job (`job`) or the breaker is open (`allowed_at`); 404 unknown edition.
 * - `GET /jobs?status=Failed&limit=50&before=<id>` → 200 `{ jobs, next }`, newest first.
 * - `GET /jobs/:id` → 200 the job; 404.
 * - `POST /recover` → 200 `{ recovered: [ids] }` (the poller's startup UPDATE).
 * - `POST /jobs/claim` (no body, `{}`, or `{ claim_key }`) → 200 `{ jobs: [job + edition +
 *   claim_token] }` or `{ jobs: [] }`; a repeated `claim_key` returns the job it claimed, same
 *   token (docs/claim-keys.md).
 * - `POST /jobs/:id/complete` `{ claim_token, result? }`, `…/fail` `{ claim_token, error }`,
 *   `…/give-back` `{ claim_token }` → 200 the job (again for a repeat with the same token); 409
 *   when the token no longer matches; 404.
 * - `POST /jobs/:id/retry` → 200 the job, `Queued`; 409 unless `Failed`; 404.
 * - `POST /jobs/retry` `{ "status": "Failed", "q"?, "dry_run"? }` → 200 the bulk retry's outcome.
 * - `POST /jobs/:id/cancel` → 200 a `Queued` job, now `Failed` (cancelled by admin; the breaker
 *   does not count it); 409 for a `Running` or finished job; 404.
 * - `GET /jobs` also takes `q` (the edition's id or title) and `cursor` (the `next_cursor`).
 * - `POST /jobs/claim` claims nothing while the queue is paused (lib/control.ts).
 *
 * Ids: JSON numbers or numeric strings up to the bigint range; `:id` matches digits only, so a
 * wrong method on `claim` or `recover` is 405 with `Allow`. Bad input is 4xx and changes nothing.
 *
 * @module
 */
import type { Hono } from "hono";
import { describeRoute, zValidator } from "../../lib/http/openapi.ts";
import { z } from "zod";
import * as queue from "./mod.ts";
import * as queueJobs from "./jobs.ts";
import { jobRoutes } from "../../lib/http/job_routes.ts";
import {
  claimKey,
  hostRouter,
  id,
  invalid,
  optionalJson,
  requireJson,
  settleRoutes,
  storableObject,
} from "../../lib/http/claim_routes.ts";

const createBody = z.strictObject({
  edition_id: id,
  priority: z.number().int().min(-1_000_000).max(1_000_000).default(0),
});
const claimBody = z.strictObject({ claim_key: claimKey.optional() });

/**
 * Build the auto-publish routes.
 *
 * @param ctx the queue's context (pool, log, events, whether complete records an IndexNow ping).
 * @returns a Hono router to mount under `/internal/auto-publish`.
 */
export function autoPublishRoutes(ctx: queue.AutoPublishContext): Hono {
  const app = hostRouter();

  const createDoc = describeRoute({
    summary: "Queue an auto-publish job for an edition",
    responses: {
      201: "The new job, Queued",
      404: "No such edition",
      409: "The edition has a Queued or Running job (`job`), or its breaker is open (`allowed_at`)",
      415: "Content-Type is not application/json",
    },
  });
  app.post("/jobs", createDoc, requireJson, zValidator("json", createBody, invalid), async (c) => {
    const body = c.req.valid("json");
    const created = await queueJobs.enqueue(ctx.sql, body.edition_id, body.priority);
    switch (created.outcome) {
      case "created":
        return c.json(created.job, 201);
      case "no_edition":
        return c.json({ error: `No such edition ${body.edition_id}` }, 404);
      case "in_flight":
        return c.json({
          error: `Cannot create an auto-publish job for edition ${body.edition_id}: job ` +
            `${created.job.id} is already ${created.job.status}`,
          job: created.job,
        }, 409);
      case "breaker":
        return c.json({
          error: `Cannot create an auto-publish job for edition ${body.edition_id}: ` +
            `${created.failures} jobs Failed in the last ${queue.BREAKER_WINDOW_H} h (breaker at ` +
            `${queue.BREAKER_FAILURES}); allowed again at ${created.allowedAt.toISOString()}`,
          allowed_at: created.allowedAt.toISOString(),
        }, 409);
    }
  });

  jobRoutes(app, {
    name: queue.name,
    log: ctx.log,
    statuses: queueJobs.STATUSES,
    base: "/jobs",
    idPattern: "{[0-9]+}",
    noun: "job",
    before: true,
    list: {
      summary: "A page of auto-publish jobs, newest first",
      rows: (page) => queueJobs.list(ctx.sql, page),
    },
    bulkRetry: {
      summary:
        "Bulk admin retry: the newest matching Failed job of each edition with none in flight",
      run: (filter, dryRun) => queueJobs.bulkRetry(ctx, filter, dryRun),
    },
    cancel: {
      summary:
        "Admin cancel: a Queued job → Failed; a Running one is refused (its step may have acted)",
      run: (jobId) => queueJobs.cancel(ctx, jobId),
    },
    read: {
      summary: "Read an auto-publish job (never its claim token)",
      run: (jobId) => queueJobs.getJob(ctx.sql, jobId),
    },
    retry: {
      summary: "Admin retry: Failed → Queued, attempts reset, error and token cleared",
      responses: {
        200: "The job, now Queued",
        404: "No such job",
        409: "The job is not Failed, or its edition has another Queued or Running job",
      },
      run: async (jobId) => {
        const retried = await queueJobs.retry(ctx, jobId);
        switch (retried.outcome) {
          case "retried":
            return { outcome: "retried", job: retried.job };
          case "absent":
            return retried;
          case "not_failed":
            return { outcome: "refused", status: retried.job.status };
          case "in_flight":
            return {
              outcome: "refused",
              status: retried.job.status,
              error: `Cannot retry job ${jobId}: edition ${retried.job.edition_id} already has ` +
                "a Queued or Running auto-publish job",
            };
        }
      },
    },
  });

  const recoverDoc = describeRoute({
    summary: "The poller's startup recovery: every Running job → Failed (interrupted)",
    responses: { 200: "`{ recovered: [ids] }`" },
  });
  app.post("/recover", recoverDoc, async (c) => c.json({ recovered: await queue.recover(ctx) }));

  app.post(
    "/jobs/claim",
    describeRoute({
      summary: "Claim the next Queued job (priority, then oldest) with a fresh claim_token; " +
        "a repeated claim_key returns the job it claimed, same token",
      responses: { 200: "`{ jobs: [job + edition + claim_token] }`, or `{ jobs: [] }`" },
      optionalBody: true,
    }),
    optionalJson,
    zValidator("json", claimBody, invalid),
    async (c) => {
      const job = await queue.claim(ctx, c.req.valid("json").claim_key);
      return c.json({ jobs: job ? [job] : [] });
    },
  );

  settleRoutes(app, {
    completeSummary: "Complete a claimed job: publish the edition and queue a Full rebuild",
    result: storableObject.optional(),
    complete: (jobId, token, result) => queue.complete(ctx, jobId, token, result ?? {}),
    fail: (jobId, token, error) => queue.fail(ctx, jobId, token, error),
    giveBack: (jobId, token) => queue.giveBack(ctx, jobId, token),
  });

  return app;
}
