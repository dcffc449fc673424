/**
 * HTTP pieces the two host-polled queues' routes share (queues/auto_publish/routes.ts,
 * queues/seo_backfill/routes.ts): id, token and limit schemas, the 400 that names the field, the
 * JSON content-type rule, 405 with `Allow`, 503 for an unreachable database, the settle routes
 * and their answer ({@linkcode settleRoutes}). Their operator routes (list, bulk retry, cancel, read, retry) are lib/http/job_routes.ts's.
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { methodNotAllowed } from "hono/method-not-allowed";
import { z } from "zod";
import type { SettleOutcome } from "../claim_token.ts";
import { describeRoute, zValidator } from "./openapi.ts";

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
 * For routes whose body is optional (the claims): an empty body reads as `{}`, declared JSON or
 * not (`curl -X POST -H 'Content-Type: application/json' …` with no `-d`); a body that is not
 * empty must be declared JSON (415), so text sent by mistake never claims with defaults.
 */
export const optionalJson = createMiddleware(async (c, next) => {
  const isJson = JSON_TYPE.test(c.req.header("content-type") ?? "");
  if ((await c.req.text()) === "") {
    // The JSON validator parses `c.req.json()`: give it `{}` in place of the empty body.
    if (isJson) {
      c.req.raw = new Request(c.req.raw, { body: "{}" });
      c.req.bodyCache = {};
    }
    return await next();
  }
  if (!isJson) return c.json({ error: "Expected Content-Type: application/json" }, 415);
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

// A settle's answers ({@linkcode settleResponse}).
function settleDoc(summary: string) {
  return describeRoute({
    summary,
    responses: {
      200: "The job (again for a repeat with the same token)",
      404: "No such job",
      409: "The claim_token no longer matches: nothing changed",
      415: "Content-Type is not application/json",
    },
  });
}

const failBody = z.strictObject({ claim_token: claimToken, error: storableText(1, 8000) });
const giveBackBody = z.strictObject({ claim_token: claimToken });

/** What {@linkcode settleRoutes} needs of a host-polled queue: its own settles and words. */
export interface SettleRoutes<T extends { id: string; status: string }, R> {
  /** The complete route's summary: what completing does in this queue. */
  readonly completeSummary: string;
  /** The complete body's `result`: the queue's own schema (optional where it may be left out). */
  readonly result: z.ZodType<R>;
  /** The queue's settles, each fenced on the token (lib/claim_token.ts `settleByToken`). */
  complete(id: string, token: string, result: R): Promise<SettleOutcome<T>>;
  fail(id: string, token: string, error: string): Promise<SettleOutcome<T>>;
  giveBack(id: string, token: string): Promise<SettleOutcome<T>>;
}

/**
 * Mount a host-polled queue's settle routes on `app`: `POST /jobs/:id/complete`
 * `{ claim_token, result }`, `…/fail` `{ claim_token, error }` (1–8000 characters), `…/give-back`
 * `{ claim_token }`, each JSON only (415 otherwise), its body checked (400 naming the field), and
 * answered by {@linkcode settleResponse}.
 */
export function settleRoutes<T extends { id: string; status: string }, R>(
  app: Hono,
  spec: SettleRoutes<T, R>,
): void {
  const byId = zValidator("param", idParam, invalid);
  const completeBody = z.strictObject({ claim_token: claimToken, result: spec.result });
  app.post(
    "/jobs/:id{[0-9]+}/complete",
    settleDoc(spec.completeSummary),
    byId,
    requireJson,
    zValidator("json", completeBody, invalid),
    async (c) => {
      const body = c.req.valid("json");
      const outcome = await spec.complete(
        c.req.valid("param").id,
        body.claim_token,
        body.result as R,
      );
      return settleResponse(c, outcome, "complete");
    },
  );
  app.post(
    "/jobs/:id{[0-9]+}/fail",
    settleDoc("Fail a claimed job with the command's error"),
    byId,
    requireJson,
    zValidator("json", failBody, invalid),
    async (c) => {
      const body = c.req.valid("json");
      const outcome = await spec.fail(c.req.valid("param").id, body.claim_token, body.error);
      return settleResponse(c, outcome, "fail");
    },
  );
  app.post(
    "/jobs/:id{[0-9]+}/give-back",
    settleDoc("Give a claimed job back: Queued, the attempt not counted"),
    byId,
    requireJson,
    zValidator("json", giveBackBody, invalid),
    async (c) => {
      const body = c.req.valid("json");
      const outcome = await spec.giveBack(c.req.valid("param").id, body.claim_token);
      return settleResponse(c, outcome, "give back");
    },
  );
}
