/**
 * HTTP pieces the two host-polled queues' routes share (queues/auto_publish/routes.ts,
 * queues/seo_backfill/routes.ts): id, token and limit schemas, the 400 that names the field, the
 * JSON content-type rule, 405 with `Allow`, 503 for an unreachable database, the answer to a
 * settle, and the operator's routes both have (list, bulk retry, cancel: {@linkcode hostJobRoutes}).
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { methodNotAllowed } from "hono/method-not-allowed";
import { z } from "zod";
import type { SettleOutcome } from "../claim_token.ts";
import type { Logger } from "../log.ts";
import type { BulkRetryOutcome, CancelOutcome, JobFilter, JobListPage } from "../queue.ts";
import { describeRoute, zValidator } from "./openapi.ts";
import {
  BULK_RETRY_RESPONSES,
  bulkRetryAnswer,
  bulkRetryBody,
  CANCEL_RESPONSES,
  cancelAnswer,
  decodeCursor,
  listAnswer,
  listQuery as operatorListQuery,
} from "./list.ts";

/** The id schemas are lib/http/ids.ts's, the one set every route uses. */
import { id, idParam } from "./ids.ts";
export { id };
export { idParam };

/** The claim token a claim handed out (uuid text; anything else never reaches the database). */
export const claimToken = z.string().regex(
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  "expected the claim_token the claim returned",
);

/**
 * A claim key (docs/claim-keys.md): a uuid the poller chose before sending the claim and sends
 * again when the claim's answer was lost; the same key returns the same jobs and tokens.
 */
export const claimKey = z.string().regex(
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  "expected a uuid the poller chose for this claim",
);

/** Text PostgreSQL can store: no NUL bytes (they fail `text` and `jsonb` with a 22xxx error). */
export function storableText(min: number, max: number) {
  return z.string().min(min).max(max).refine((s) => !s.includes("\0"), "must not contain NUL");
}

/** A JSON object PostgreSQL's `jsonb` can store (no `\u0000` anywhere in it). */
export const storableObject = z.record(z.string(), z.unknown()).refine(
  (v) => !JSON.stringify(v).includes("\\u0000"),
  "must not contain NUL",
);

/** A positive integer from a JSON number or a numeric string, from 1 to `max`. */
export function count(max: number) {
  return z.union([z.number(), z.string().regex(/^\d{1,40}$/).transform(Number)])
    .pipe(z.number().int().min(1).max(max));
}

/**
 * Query of a list route: `?status=&q=&limit=&cursor=` as every queue's list takes it
 * (lib/http/list.ts), and `before` (an id: the `next` of the previous page), which the host
 * queues' lists took first.
 */
export function listQuery<S extends readonly [string, ...string[]]>(statuses: S) {
  return operatorListQuery(statuses).extend({ before: id.optional() });
}

interface Checked {
  success: boolean;
  /** Where the input came from (`json`, `query`, `param`, `form`, …), as zValidator passes it. */
  target?: string;
  error?: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> };
}

/** zValidator's hook: bad input is a 400 JSON error that names the field (docs/development.md). */
export function invalid(result: Checked): Response | undefined {
  if (result.success || !result.error) return undefined;
  const issue = result.error.issues[0];
  // An issue with no path is about the whole input: the body, or the query string or the path.
  const whole = result.target === "query" ? "query" : result.target === "param" ? "path" : "body";
  const where = issue.path.length > 0 ? issue.path.map(String).join(".") : whole;
  return Response.json({ error: `Invalid ${where}: ${issue.message}` }, { status: 400 });
}

const JSON_TYPE = /^application\/([\w.+-]*\+)?json\b/i;

/** Refuse a body that is not declared JSON (415): else it would be read as `{}`. */
export const requireJson = createMiddleware(async (c, next) => {
  if (!JSON_TYPE.test(c.req.header("content-type") ?? "")) {
    return c.json({ error: "Expected Content-Type: application/json" }, 415);
  }
  return await next();
});

/**
 * For routes whose body is optional (the claims): no body at all reads as `{}`; a body must be
 * declared JSON (415), so text sent by mistake never claims with defaults.
 */
export const optionalJson = createMiddleware(async (c, next) => {
  if (JSON_TYPE.test(c.req.header("content-type") ?? "")) return await next();
  if ((await c.req.text()) !== "") {
    return c.json({ error: "Expected Content-Type: application/json" }, 415);
  }
  return await next();
});

// postgres.js and Deno socket codes, and SQLSTATEs, that mean "the database is not there now".
const UNAVAILABLE =
  /^(08|57P0[123]|53300|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EPIPE|CONNECT_TIMEOUT|CONNECTION_)/;

/** Whether an error means the database is unreachable (→ 503), not a bug (→ 500). */
export function isUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && UNAVAILABLE.test(code)) return true;
    if (e instanceof Deno.errors.ConnectionRefused || e instanceof Deno.errors.ConnectionReset) {
      return true;
    }
  }
  return false;
}

/**
 * A router for a host queue: a wrong method on a known path is 405 with `Allow` (also when
 * `hono/method-not-allowed` is mounted app-wide: this one answers first and that one then sees no
 * 404), and an unreachable database is 503; any other error goes on to the app's `onError`.
 */
export function hostRouter(): Hono {
  const app = new Hono();
  app.use(methodNotAllowed({
    app,
    onMethodNotAllowed: (c, methods) =>
      c.json({ error: `Method ${c.req.method} not allowed: use ${methods.join(", ")}` }, 405, {
        Allow: methods.join(", "),
      }),
  }));
  app.onError((err, c) => {
    if (!isUnavailable(err)) throw err;
    c.header("Retry-After", "5");
    return c.json({ error: "Database not reachable; retry later" }, 503);
  });
  return app;
}

/**
 * The answer to a settle: 200 the job (settled now, or already by this token: the same answer),
 * 409 when the token no longer matches (nothing changed), 404 for an unknown id.
 */
export function settleResponse<T extends { id: string; status: string }>(
  c: Context,
  outcome: SettleOutcome<T>,
  verb: string,
): Response {
  if (outcome.outcome === "absent") return c.json({ error: "No such job" }, 404);
  if (outcome.outcome === "lost") {
    const { job } = outcome;
    return c.json({
      error: `Cannot ${verb} job ${job.id}: the claim_token no longer matches (the job is ` +
        `${job.status}: swept, recovered, retried, re-claimed or settled otherwise); nothing changed`,
      status: job.status,
    }, 409);
  }
  return c.json(outcome.job, 200);
}

/** What {@linkcode hostJobRoutes} needs of a host-polled queue: its own statements and words. */
export interface HostJobRoutes<R extends { id: string; status: string | null }> {
  /** The queue's name, for the bulk retry's log line. */
  readonly name: string;
  readonly log: Logger;
  /** Its status names (the list's `status` filter). */
  readonly statuses: readonly [string, ...string[]];
  /** What the list and the bulk retry do, for the OpenAPI document. */
  readonly listSummary: string;
  readonly bulkRetrySummary: string;
  /** A page of jobs, newest first (the queue's `list`). */
  list(page: JobListPage): Promise<R[]>;
  /** The queue's bulk retry, under its own rule. */
  bulkRetry(filter: JobFilter, dryRun: boolean): Promise<BulkRetryOutcome>;
  /** The queue's cancel: a Queued job → Failed; a Running one refused. */
  cancel(id: string): Promise<CancelOutcome<R>>;
}

/**
 * The operator's routes both host-polled queues have, over each queue's own statements:
 * `GET /jobs` (keyset pages; `next` is the next page's `before`, as this list first answered),
 * `POST /jobs/retry` (bulk retry, `dry_run` counts first) and `POST /jobs/:id/cancel` (a
 * `Running` job is refused: its step may already have acted).
 */
export function hostJobRoutes<R extends { id: string; status: string | null }>(
  app: Hono,
  queue: HostJobRoutes<R>,
): void {
  const listDoc = describeRoute({
    summary: queue.listSummary,
    responses: {
      200: "`{ jobs, next_cursor, next }`: `next_cursor` is the `cursor` of the next page, " +
        "`next` its `before` (both null on the last page)",
    },
  });
  app.get("/jobs", listDoc, zValidator("query", listQuery(queue.statuses), invalid), async (c) => {
    const { cursor, before, limit, ...filter } = c.req.valid("query");
    const beforeId = (cursor ? decodeCursor(cursor) : null) ?? before;
    const page = listAnswer(await queue.list({ ...filter, beforeId, limit: limit + 1 }), limit);
    const next = page.next_cursor ? page.jobs[page.jobs.length - 1].id : null;
    return c.json({ ...page, next });
  });

  const bulkDoc = describeRoute({
    summary: queue.bulkRetrySummary,
    responses: BULK_RETRY_RESPONSES,
  });
  app.post(
    "/jobs/retry",
    bulkDoc,
    requireJson,
    zValidator("json", bulkRetryBody, invalid),
    async (c) => {
      const { dry_run, ...filter } = c.req.valid("json");
      const outcome = await queue.bulkRetry(filter, dry_run);
      if (!dry_run) {
        queue.log.info({ queue: queue.name, ...filter, retried: outcome.retried }, "bulk retry");
      }
      return bulkRetryAnswer(c, outcome, dry_run);
    },
  );

  const cancelDoc = describeRoute({
    summary:
      "Admin cancel: a Queued job → Failed; a Running one is refused (its step may have acted)",
    responses: CANCEL_RESPONSES,
  });
  const byId = zValidator("param", idParam, invalid);
  app.post("/jobs/:id{[0-9]+}/cancel", cancelDoc, byId, async (c) => {
    const jobId = c.req.valid("param").id;
    return cancelAnswer(c, await queue.cancel(jobId), "job", jobId);
  });
}
