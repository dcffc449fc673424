/**
 * The internal HTTP API: `createApi(deps)` returns the Hono app (it never calls `Deno.serve`).
 *
 * - `GET /healthz`: no token; 200 `{ status: "ok", … }` or 503 when the database does not answer.
 * - `/internal/*`: body limit → bearer token → the mounted routes (each queue's own).
 * - `GET /internal/events`: the live job event stream as Server-Sent Events.
 *
 * Every error is JSON `{ error }`: an `HTTPException` keeps its status, bad input is 4xx, anything
 * else is logged and answered 500 (STYLE.md §7).
 *
 * @module
 */
import { Hono } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { streamSSE } from "hono/streaming";
import type { Logger } from "./log.ts";
import type { EventHub } from "./events.ts";
import { Drain } from "./drain.ts";
import type { Lifecycle } from "./lifecycle.ts";

/** Largest request body accepted under `/internal`, in bytes. */
export const MAX_BODY_BYTES = 64 * 1024;
/** Events buffered per SSE subscriber before its oldest are dropped. */
export const EVENTS_PER_SUBSCRIBER = 256;

/** What {@linkcode createApi} needs. */
export interface ApiDeps {
  /** The bearer token every `/internal` route requires. */
  token: string;
  log: Logger;
  events: EventHub;
  /** Registers each SSE stream's drain so shutdown stops it within the budget. */
  lifecycle: Lifecycle;
  /** Liveness detail for `/healthz`; throws when the database does not answer. */
  health: () => Promise<Record<string, unknown>>;
  /** Route groups mounted under `/internal`, by path, e.g. `{ "/ingestion": ingestionRoutes }`. */
  routes: Record<string, Hono>;
  /**
   * Paths under `/internal` exempt from the JSON body limit, e.g. `["/user-books"]` for an upload
   * route that streams and caps its body itself.
   */
  unlimitedBodies?: ReadonlyArray<string>;
}

/**
 * Build the API.
 *
 * @returns a Hono app; serve it with `Deno.serve(app.fetch)` or test it with `app.request()`.
 * @example
 * const app = createApi({ token, log, events, lifecycle, health, routes: { "/ingestion": r } });
 * const res = await app.request("/healthz");
 */
export function createApi(deps: ApiDeps): Hono {
  const app = new Hono();
  let streams = 0;

  app.get("/healthz", async (c) => {
    try {
      return c.json({ status: "ok", ...(await deps.health()) });
    } catch (err) {
      deps.log.warn({ err: String(err) }, "health check failed");
      return c.json({ status: "unavailable", error: "database not reachable" }, 503);
    }
  });

  const limit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => c.json({ error: `Request body exceeds ${MAX_BODY_BYTES} bytes` }, 413),
  });
  const unlimited = new Set((deps.unlimitedBodies ?? []).map((path) => `/internal${path}`));
  app.use(
    "/internal/*",
    (c, next) => unlimited.has(c.req.path.replace(/\/$/, "")) ? next() : limit(c, next),
  );
  // Object messages make bearerAuth answer JSON, like every other error here.
  app.use(
    "/internal/*",
    bearerAuth({
      token: deps.token,
      noAuthenticationHeader: {
        message: { error: "Missing bearer token: send Authorization: Bearer <INTERNAL_API_TOKEN>" },
      },
      invalidAuthenticationHeader: {
        message: { error: "Malformed Authorization header: expected Bearer <token>" },
      },
      invalidToken: { message: { error: "Invalid bearer token" } },
    }),
  );

  app.get("/internal/events", (c) =>
    streamSSE(c, async (stream) => {
      const name = `events subscriber ${++streams}`;
      // The drain logs this subscriber's drops (rate-limited) from the channel's own count.
      const sub = deps.events.subscribe(EVENTS_PER_SUBSCRIBER);
      const drain = new Drain({
        name,
        channel: sub.channel,
        log: deps.log,
        handle: (event) =>
          stream.writeSSE({
            id: String(event.seq),
            event: event.transition,
            data: JSON.stringify(event),
          }),
      });
      const unregister = deps.lifecycle.onStop("drains", name, async (deadline) => {
        await drain.stop(Math.max(0, deadline - performance.now()));
      });
      stream.onAbort(() => sub.close());
      // "ready" first: the subscription exists, so the client sees every event from here on.
      await stream.writeSSE({ event: "ready", data: "{}" });
      drain.start();
      await drain.done;
      unregister();
    }));

  for (const [path, routes] of Object.entries(deps.routes)) app.route(`/internal${path}`, routes);

  app.notFound((c) => c.json({ error: `No route for ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => {
    if (err instanceof HTTPException) {
      const res = err.getResponse();
      if (res.headers.get("content-type")?.includes("application/json")) return res;
      const headers = new Headers(res.headers);
      headers.set("content-type", "application/json");
      const error = err.message || `Request failed with status ${res.status}`;
      return new Response(JSON.stringify({ error }), { status: res.status, headers });
    }
    deps.log.error({ err, method: c.req.method, path: c.req.path }, "request failed");
    return c.json({ error: "Internal server error" }, 500);
  });
  return app;
}

/**
 * Read the generated internal API token from `<dataDir>/internal_api_token`, creating it (mode
 * 0600) on first use. The token itself is never logged; where it lives is.
 *
 * @returns the token.
 * @throws the file-system error when the file cannot be read or written.
 */
export async function loadOrCreateToken(dataDir: string, log: Logger): Promise<string> {
  const path = `${dataDir}/internal_api_token`;
  try {
    const token = (await Deno.readTextFile(path)).trim();
    if (token) {
      log.info({ path }, "using the generated INTERNAL_API_TOKEN");
      return token;
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  await Deno.mkdir(dataDir, { recursive: true });
  await Deno.writeTextFile(path, `${token}\n`, { mode: 0o600 });
  log.info({ path }, "INTERNAL_API_TOKEN unset: generated one; read it from this file");
  return token;
}
