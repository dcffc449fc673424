/**
 * The internal HTTP API: `createApi(deps)` returns the Hono app (it never calls `Deno.serve`).
 *
 * - `GET /healthz`: no token; 200 while the process answers. It never touches the database, so a
 *   database outage never gets the worker restarted.
 * - `GET /readyz`: no token; 200 when ready to take traffic (migrated, database answers, every
 *   consumer holds its lock or stands by for a real holder, listener live), else 503 with the
 *   failing checks; 503 from the first shutdown signal on. `paused` lists the paused queues (a
 *   paused queue is still ready).
 * - `/internal/*`: body limit → bearer token (every refusal 401 with `WWW-Authenticate: Bearer`,
 *   lib/http/bearer.ts) → the mounted routes (each queue's own).
 * - `GET /internal/events`: the live job event stream as Server-Sent Events; `HEAD` answers
 *   without subscribing; refused (503) from the first shutdown signal on.
 * - `GET /internal/openapi.json`: the OpenAPI 3.1 document of every `/internal` route
 *   (lib/http/openapi_document.ts, loaded on the first request), generated from the validators' own
 *   schemas.
 * - `apps`: mounted at the root with their own auth (`/metrics`, `/admin`). A {@linkcode LazyApp}
 *   is loaded on the first request under its prefix (the dashboard is not held
 *   at idle until someone opens it) and answers as if mounted.
 *
 * Every error is JSON `{ error }`: an `HTTPException` keeps its status, bad input is 4xx, a wrong
 * method on a known path is 405 with `Allow` (for every route, mounted ones too), a database
 * that is unavailable is 503, anything else is logged and answered 500 (docs/development.md).
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { methodNotAllowed } from "hono/method-not-allowed";
import { streamSSE } from "hono/streaming";
import type { Logger } from "../log.ts";
import type { EventHub, SequencedEvent } from "../events.ts";
import { Drain } from "../drain.ts";
import type { Lifecycle } from "../lifecycle.ts";
import { dbFault } from "../db.ts";
import { describeRoute } from "./openapi.ts";
import { bearerGuard } from "./bearer.ts";

/** Largest request body accepted under `/internal`, in bytes. */
export const MAX_BODY_BYTES = 64 * 1024;
/** Events buffered per SSE subscriber before its oldest are dropped. */
export const EVENTS_PER_SUBSCRIBER = 256;
/**
 * A comment line is sent on an event stream this often, in ms, so an idle stream is not cut by a
 * proxy's read timeout (nginx `proxy_read_timeout` 60 s, cloud load balancers 30–60 s).
 */
export const HEARTBEAT_MS = 15_000;
/** The `retry:` a stream gives `EventSource`: reconnect this many ms after a cut. */
export const RECONNECT_MS = 3_000;

/** What {@linkcode createApi} needs. */
export interface ApiDeps {
  /** The bearer token every `/internal` route requires. */
  token: string;
  log: Logger;
  events: EventHub;
  /** Registers each SSE stream's drain so shutdown stops it within the budget. */
  lifecycle: Lifecycle;
  /** Heartbeat period of the event streams, in ms ({@linkcode HEARTBEAT_MS} when absent). */
  heartbeatMs?: number;
  /** Liveness detail for `/healthz` (e.g. the boot id); must not touch the database. */
  health: () => Promise<Record<string, unknown>>;
  /** Readiness for `/readyz` (checked only while not shutting down). */
  ready?: () => Promise<Readiness>;
  /** Route groups mounted under `/internal`, by path, e.g. `{ "/ingestion": ingestionRoutes }`. */
  routes: Record<string, Hono>;
  /**
   * Paths under `/internal` whose `multipart/form-data` bodies are exempt from the body limit (other
   * content types keep it), e.g. `["/user-books"]` for an upload route that streams and caps its
   * body itself.
   */
  unlimitedBodies?: ReadonlyArray<string>;
  /** Apps mounted at the root with their own auth, e.g. `/metrics` and `/admin`. */
  apps?: Array<Hono | LazyApp>;
}

/**
 * An app mounted at the root but loaded on the first request under `prefix` (a dynamic import:
 * what no request needs is not held in memory). It answers as a mounted app does: a
 * wrong method on one of its paths is 405 with `Allow`, an unknown path the API's JSON 404, and
 * an error it throws reaches the API's `onError`. A load that fails is tried again on the next
 * request.
 */
export interface LazyApp {
  /** The path it serves, itself and everything under it, e.g. `/admin`. */
  prefix: string;
  /** Builds the app, e.g. `async () => (await import("../admin/dashboard.tsx")).adminRoutes(deps)`. */
  load: () => Promise<Hono>;
}

/** What `/readyz` reports: ready or not, and each check's value. */
export interface Readiness {
  readonly ready: boolean;
  readonly checks: Readonly<Record<string, unknown>>;
  /** Which instance answers (boot id, pid, host, the queues it consumes). */
  readonly instance?: Readonly<Record<string, unknown>>;
  /** The paused queues (lib/control.ts): shown in a field of their own, never unready. */
  readonly paused?: readonly string[];
}

/** What {@linkcode streamEvents} needs. */
export type EventStreamDeps = Pick<ApiDeps, "events" | "lifecycle" | "log" | "heartbeatMs">;

const OPENAPI_INFO = {
  title: "TextStack edge worker internal API",
  version: "1",
  description: "Every route needs `Authorization: Bearer <INTERNAL_API_TOKEN>`.",
  // The worker is not published under an open licence: its API description says so.
  license: { name: "Proprietary: TextStack internal use only", identifier: "LicenseRef-TextStack" },
};

/**
 * Answer with the live job event stream as Server-Sent Events: `ready` once subscribed (with
 * `retry:`), then one event per committed transition, each with its `id:` (`<epoch>-<seq>`),
 * through a drop-oldest subscription and a drain registered with the lifecycle, so shutdown
 * closes it within the budget (ADR-052). From the first shutdown signal on it refuses new streams
 * (503); a `HEAD` is answered without subscribing.
 *
 * Behind proxies: `X-Accel-Buffering: no` (nginx passes each event on at once),
 * `Cache-Control: no-cache`, and a `: heartbeat` comment every `heartbeatMs` (15 s), so an idle
 * stream is never cut for silence. A client that reconnects with `Last-Event-ID` (EventSource
 * does) first gets the events it missed that the hub's replay buffer still holds, or, when it
 * cannot (another process's id, or older than the buffer), a `reset` event: re-read the state.
 *
 * @param name the subscriber's name in logs, e.g. `events subscriber 3`.
 * @returns the streaming response, or the 503 / `HEAD` answer.
 * @example
 * app.get("/admin/events", (c) => streamEvents(c, deps, "admin subscriber 1"));
 */
export function streamEvents(c: Context, deps: EventStreamDeps, name: string): Response {
  // A process that is leaving takes no new streams.
  if (deps.lifecycle.stopping.aborted) {
    return c.json({ error: "Shutting down: connect to another instance" }, 503);
  }
  // Hono runs the GET handler for HEAD: answer it without subscribing.
  if (c.req.method === "HEAD") {
    return c.body(null, 200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
    });
  }
  c.header("X-Accel-Buffering", "no");
  const after = c.req.header("last-event-id") ?? undefined;
  return streamSSE(c, async (stream) => {
    // The drain logs this subscriber's drops (rate-limited) from the channel's own count.
    const sub = deps.events.subscribe(EVENTS_PER_SUBSCRIBER, undefined, after);
    const send = (event: SequencedEvent) =>
      stream.writeSSE({
        id: deps.events.eventId(event),
        event: event.transition,
        data: JSON.stringify(event),
      });
    const drain = new Drain({ name, channel: sub.channel, log: deps.log, handle: send });
    const unregister = deps.lifecycle.onStop("drains", name, async (deadline) => {
      await drain.stop(Math.max(0, deadline - performance.now()));
    });
    stream.onAbort(() => sub.close());
    // Each write is one chunk, so a comment never lands inside an event.
    const heartbeat = setInterval(
      () => void stream.write(": heartbeat\n\n").catch(() => {}),
      deps.heartbeatMs ?? HEARTBEAT_MS,
    );
    try {
      // "ready" first: the subscription exists, so the client sees every event from here on.
      await stream.writeSSE({ event: "ready", data: "{}", retry: RECONNECT_MS });
      if (after !== undefined && sub.replay === null) {
        await stream.writeSSE({
          event: "reset",
          data: JSON.stringify({
            lastEventId: after,
            error: "Cannot replay the events after this id (another process's stream, or " +
              "older than the replay buffer): re-read the state",
          }),
        });
      }
      for (const event of sub.replay ?? []) await send(event);
      drain.start();
      await drain.done;
    } finally {
      clearInterval(heartbeat);
      unregister();
    }
  });
}

// The API's own answers to a wrong method and to an unknown path, for mounted and lazy apps alike.
const onMethodNotAllowed = (c: Context, methods: string[]): Response =>
  c.json({ error: `Method ${c.req.method} not allowed on ${c.req.path}` }, 405, {
    Allow: methods.join(", "),
  });
const notFound = (c: Context): Response =>
  c.json({ error: `No route for ${c.req.method} ${c.req.path}` }, 404);

// Route everything under `lazy.prefix` to the app it loads, once. The loaded app is wrapped as
// createApi wraps its own routes (405 first, the JSON 404), and its errors are thrown on to this
// API's onError rather than answered by Hono's default one.
function mountLazy(app: Hono, lazy: LazyApp): void {
  let loading: Promise<Hono> | undefined;
  const load = async (): Promise<Hono> => {
    const wrapper = new Hono();
    wrapper.use(methodNotAllowed({ app: wrapper, onMethodNotAllowed }));
    wrapper.route("/", await lazy.load());
    wrapper.notFound(notFound);
    wrapper.onError((err) => {
      throw err;
    });
    return wrapper;
  };
  const handler = async (c: Context): Promise<Response> => {
    loading ??= load().catch((err) => {
      loading = undefined;
      throw err;
    });
    return await (await loading).fetch(c.req.raw, c.env);
  };
  app.all(lazy.prefix, handler);
  app.all(`${lazy.prefix}/*`, handler);
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

  // First, so every route (mounted ones too) answers a wrong method with 405 and Allow.
  app.use(methodNotAllowed({ app, onMethodNotAllowed }));

  app.get("/healthz", async (c) => c.json({ status: "ok", ...(await deps.health()) }));

  app.get("/readyz", async (c) => {
    if (deps.lifecycle.stopping.aborted) {
      return c.json({ status: "stopping", ready: false, checks: { stopping: true } }, 503);
    }
    const readiness = await (deps.ready?.() ?? Promise.resolve({ ready: true, checks: {} }));
    return c.json(
      { status: readiness.ready ? "ready" : "unready", ...readiness },
      readiness.ready ? 200 : 503,
    );
  });

  const limit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => c.json({ error: `Request body exceeds ${MAX_BODY_BYTES} bytes` }, 413),
  });
  const unlimited = new Set((deps.unlimitedBodies ?? []).map((path) => `/internal${path}`));
  // Only a multipart upload is exempt: the same path's JSON body is read whole.
  app.use(
    "/internal/*",
    (c, next) =>
      unlimited.has(c.req.path.replace(/\/$/, "")) &&
        /^multipart\/form-data\b/i.test(c.req.header("content-type") ?? "")
        ? next()
        : limit(c, next),
  );
  // Every refusal is 401 JSON with a Bearer challenge (lib/http/bearer.ts).
  app.use("/internal/*", bearerGuard(deps.token, "INTERNAL_API_TOKEN", "textstack-internal"));

  app.get(
    "/internal/events",
    describeRoute({
      summary: "Live job events (Server-Sent Events), one per committed status transition",
      operationId: "streamEvents",
      database: false,
      responses: {
        200: "text/event-stream: `ready`, then one event per transition",
        503: "Shutting down: connect to another instance",
      },
    }),
    (c) => streamEvents(c, deps, `events subscriber ${++streams}`),
  );

  for (const [path, routes] of Object.entries(deps.routes)) app.route(`/internal${path}`, routes);
  app.get(
    "/internal/openapi.json",
    describeRoute({
      summary: "This document (OpenAPI 3.1)",
      operationId: "getOpenApiDocument",
      responses: { 200: "The document" },
      database: false,
    }),
    // The document's builder is loaded on the first request.
    async (c) => {
      const { openApiDocument } = await import("./openapi_document.ts");
      // The server is this worker, as the client reached it (behind a proxy: its forwarded
      // scheme and host).
      const url = new URL(c.req.url);
      const proto = c.req.header("x-forwarded-proto") ?? url.protocol.replace(":", "");
      const host = c.req.header("x-forwarded-host") ?? url.host;
      return c.json(openApiDocument(app, "/internal", OPENAPI_INFO, [
        { url: `${proto}://${host}`, description: "This worker" },
      ]));
    },
  );
  for (const other of deps.apps ?? []) {
    if (other instanceof Hono) app.route("/", other);
    else mountLazy(app, other);
  }

  app.notFound(notFound);
  app.onError((err, c) => {
    if (err instanceof HTTPException) {
      const res = err.getResponse();
      if (res.headers.get("content-type")?.includes("application/json")) return res;
      const headers = new Headers(res.headers);
      headers.set("content-type", "application/json");
      const error = err.message || `Request failed with status ${res.status}`;
      return new Response(JSON.stringify({ error }), { status: res.status, headers });
    }
    const fault = dbFault(err);
    if (fault) {
      deps.log.warn(
        { code: fault.code, err: String(err), method: c.req.method, path: c.req.path },
        "request failed: database unavailable",
      );
      return c.json({ error: "Database unavailable; retry later" }, 503, { "Retry-After": "5" });
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
  try {
    // create-new: two processes starting together must not each write their own token.
    await Deno.writeTextFile(path, `${token}\n`, { mode: 0o600, createNew: true });
  } catch (err) {
    if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
    return await readWhenWritten(path, log);
  }
  log.info({ path }, "INTERNAL_API_TOKEN unset: generated one; read it from this file");
  return token;
}

// The other process created the file and is writing it: read it once it holds a whole line.
async function readWhenWritten(path: string, log: Logger): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const text = await Deno.readTextFile(path);
    if (text.endsWith("\n") && text.trim()) {
      log.info({ path }, "using the generated INTERNAL_API_TOKEN");
      return text.trim();
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`Cannot read the token file "${path}": it stays empty`);
}
