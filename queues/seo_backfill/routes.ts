/**
 * The SEO backfill queue's claim API, mounted at `/internal/seo` by main.ts (behind the bearer
 * token and body limit of lib/http/api.ts). Clients: the host poller `host/seo-backfill-poll.sh` and the
 * admin crew path; the diagram of states and verbs is in queues/seo_backfill/mod.ts.
 *
 * - `POST /jobs` `{ "edition_id": "12" }` → 201 the job (`Queued`); 404 unknown edition.
 * - `GET /jobs?status=&limit=&before=` → 200 `{ jobs, next }`, newest first; `GET /jobs/:id`.
 * - `POST /jobs/claim` `{ "limit"?: 1..50, "claim_key"?: uuid }` (default 1) → 200 `{ jobs: [job
 *   + edition + claim_token] }`, after the stale sweep; a repeated `claim_key` returns the jobs it
 *   claimed that are still `Running`, same tokens (docs/claim-keys.md).
 * - `POST /jobs/give-back` `{ "jobs": [{ id, claim_token }, …] }` (1..50) → 200 `{ jobs: [{ id,
 *   outcome, status }] }`: each fenced on its token, as the one-job give-back (the poller's stop).
 * - `POST /jobs/crew` `{ "edition_id": "12" }` → 201 the job, already `Running`, with its
 *   `claim_token` and edition.
 * - `POST /jobs/:id/complete` `{ claim_token, result: { meta_title, meta_description,
 *   meta_keywords } }` (applies them), `…/fail` `{ claim_token, error }`, `…/give-back`
 *   `{ claim_token }` → 200 the job (again for a repeat with the same token); 409 when the token no
 *   longer matches; 404.
 * - `POST /jobs/:id/retry` → 200 the job, `Queued`; 409 unless `Failed`; 404.
 * - `POST /jobs/retry` `{ "status": "Failed", "q"?, "dry_run"? }` → 200 the bulk retry's outcome.
 * - `POST /jobs/:id/cancel` → 200 a `Queued` job, now `Failed` (cancelled by admin); 409 for a
 *   `Running` or finished job; 404.
 * - `GET /jobs` also takes `q` (the edition's id or title) and `cursor` (the `next_cursor`).
 * - `POST /jobs/claim` claims nothing while the queue is paused (lib/control.ts).
 * - `POST /editions/:id/revert` → 200 the edition's restored SEO fields; 409 when there is nothing
 *   to revert; 404 unknown edition.
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
  claimToken,
  count,
  hostRouter,
  id,
  idParam,
  invalid,
  optionalJson,
  requireJson,
  settleRoutes,
  storableText,
} from "../../lib/http/claim_routes.ts";

const editionBody = z.strictObject({ edition_id: id });
const claimBody = z.strictObject({
  limit: count(queue.MAX_CLAIM).default(1),
  claim_key: claimKey.optional(),
});
/** What an SEO command must produce (and the complete route stores and applies). */
export const seoFields = z.strictObject({
  meta_title: storableText(1, 300),
  meta_description: storableText(0, 1000),
  meta_keywords: z.array(storableText(1, 100)).max(30),
});
const giveBackManyBody = z.strictObject({
  jobs: z.array(z.strictObject({ id, claim_token: claimToken })).min(1).max(queue.MAX_CLAIM)
    .refine((jobs) => new Set(jobs.map((j) => j.id)).size === jobs.length, "ids must be unique"),
});

/**
 * Build the SEO backfill routes.
 *
 * @param ctx the queue's context (pool, log, events, stale threshold).
 * @returns a Hono router to mount under `/internal/seo`.
 */
export function seoRoutes(ctx: queue.SeoContext): Hono {
  const app = hostRouter();
  const byId = zValidator("param", idParam, invalid);

  const createDoc = describeRoute({
    summary: "Queue an SEO backfill job for an edition",
    responses: { 201: "The new job, Queued", 404: "No such edition" },
  });
  app.post("/jobs", createDoc, requireJson, zValidator("json", editionBody, invalid), async (c) => {
    const editionId = c.req.valid("json").edition_id;
    const job = await queueJobs.enqueue(ctx, editionId);
    return job ? c.json(job, 201) : c.json({ error: `No such edition ${editionId}` }, 404);
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
      summary: "A page of SEO jobs, newest first",
      rows: (page) => queueJobs.list(ctx.sql, page),
    },
    bulkRetry: {
      summary: "Bulk admin retry: every Failed job matching the filter → Queued (at most 10,000)",
      run: (filter, dryRun) => queueJobs.bulkRetry(ctx, filter, dryRun),
    },
    cancel: {
      summary:
        "Admin cancel: a Queued job → Failed; a Running one is refused (its step may have acted)",
      run: (jobId) => queueJobs.cancel(ctx, jobId),
    },
    read: {
      summary: "Read an SEO job (never its claim token)",
      run: (jobId) => queueJobs.getJob(ctx.sql, jobId),
    },
    retry: {
      summary: "Admin retry: Failed → Queued, attempts reset, error and token cleared",
      run: async (jobId) => {
        const retried = await queueJobs.retry(ctx, jobId);
        if (retried.outcome === "absent") return retried;
        if (retried.outcome === "retried") return { outcome: "retried", job: retried.job };
        return { outcome: "refused", status: retried.job.status };
      },
    },
  });

  const claimDoc = describeRoute({
    summary: "Sweep stale Running jobs, then claim up to `limit` Queued jobs, oldest first; a " +
      "repeated claim_key returns the jobs it claimed, same tokens",
    responses: { 200: "`{ jobs: [job + edition + claim_token] }` ([] when none)" },
    optionalBody: true,
  });
  app.post(
    "/jobs/claim",
    claimDoc,
    optionalJson,
    zValidator("json", claimBody, invalid),
    async (c) => {
      const body = c.req.valid("json");
      return c.json({ jobs: await queue.claim(ctx, body.limit, body.claim_key) });
    },
  );

  const giveBackManyDoc = describeRoute({
    summary: "Give several claimed jobs back in one request (each fenced on its token)",
    responses: {
      200: "`{ jobs: [{ id, outcome, status }] }`: outcome settled, repeated, lost or absent",
      415: "Content-Type is not application/json",
    },
  });
  app.post(
    "/jobs/give-back",
    giveBackManyDoc,
    requireJson,
    zValidator("json", giveBackManyBody, invalid),
    async (c) => {
      const jobs = c.req.valid("json").jobs.map((j) => ({ id: j.id, token: j.claim_token }));
      const outcomes = await queue.giveBackMany(ctx, jobs);
      return c.json({
        jobs: outcomes.map((o) => ({
          id: o.id,
          outcome: o.outcome,
          status: o.outcome === "absent" ? null : o.job.status,
        })),
      });
    },
  );

  const crewDoc = describeRoute({
    summary: "The admin crew path: a job inserted already Running, with its claim_token",
    responses: {
      201: "The job, Running, with its edition and claim_token",
      404: "No such edition",
    },
  });
  app.post(
    "/jobs/crew",
    crewDoc,
    requireJson,
    zValidator("json", editionBody, invalid),
    async (c) => {
      const editionId = c.req.valid("json").edition_id;
      const job = await queue.crew(ctx, editionId);
      return job ? c.json(job, 201) : c.json({ error: `No such edition ${editionId}` }, 404);
    },
  );

  settleRoutes(app, {
    completeSummary: "Complete a claimed job and apply its SEO fields (BeforeSnapshot taken once)",
    result: seoFields,
    complete: (jobId, token, result) => queue.complete(ctx, jobId, token, result),
    fail: (jobId, token, error) => queue.fail(ctx, jobId, token, error),
    giveBack: (jobId, token) => queue.giveBack(ctx, jobId, token),
  });

  const revertDoc = describeRoute({
    summary: "Restore an edition's SEO fields from its BeforeSnapshot (then dropped)",
    responses: {
      200: "The edition's restored SEO fields",
      404: "No such edition",
      409: "Nothing to revert (no BeforeSnapshot)",
    },
  });
  app.post("/editions/:id{[0-9]+}/revert", revertDoc, byId, async (c) => {
    const editionId = c.req.valid("param").id;
    const reverted = await queue.revert(ctx, editionId);
    if (reverted.outcome === "reverted") return c.json(reverted.edition);
    if (reverted.outcome === "absent") {
      return c.json({ error: `No such edition ${editionId}` }, 404);
    }
    return c.json({
      error:
        `Cannot revert edition ${editionId}: the SEO path has not changed it (no BeforeSnapshot)`,
    }, 409);
  });

  return app;
}
