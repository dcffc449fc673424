/**
 * The admin dashboard at `/admin`: an overview of every queue, a queue's jobs (by
 * status and search), one job with its attempt history, and the operator's actions: retry a
 * `Failed` job (ADR-022), cancel a runnable or running one, bulk-retry the `Failed` jobs matching
 * a search (their count shown before the operator confirms), pause and resume a queue
 * (lib/control.ts). Everything is read and written through each queue's {@linkcode QueueView};
 * counts come from the background {@linkcode StatsCache}, never counted per request.
 *
 * Auth: the token (`METRICS_TOKEN` when set, else `INTERNAL_API_TOKEN`) is given once on the login
 * form; the answer is a cookie holding a session id from this process's {@linkcode SessionStore}
 * (so signing out ends the session), signed with HMAC-SHA256 under a key derived from the
 * token (never the token itself), `HttpOnly`, `SameSite=Strict`, `Path=/admin`, and `Secure` when
 * the request came over https. Every form post also passes `hono/csrf` (its Origin or
 * `Sec-Fetch-Site: same-origin` must match, as Sidekiq's `safe_request?`). Live updates come from
 * `/admin/events`, the job event stream behind the same cookie. Sign-in is rate-limited per
 * client address (lib/admin/login_limit.ts). Every answer carries `hono/secure-headers`: a CSP of
 * this origin's own files only (the style and the script are served from `/admin/assets/`, never
 * inline) and `X-Frame-Options: DENY`.
 *
 * @module
 */
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { csrf } from "hono/csrf";
import { deleteCookie, getSignedCookie, setSignedCookie } from "hono/cookie";
import { timingSafeEqual } from "hono/utils/buffer";
import type { QueueContext } from "../queue.ts";
import type { QueueControl } from "../control.ts";
import type { QueueView } from "./queue_view.ts";
import type { StatsCache } from "./stats_cache.ts";
import { type EventStreamDeps, streamEvents } from "../http/api.ts";
import { secureHeaders } from "hono/secure-headers";
import {
  BulkRetryPage,
  type InstanceInfo,
  LoginPage,
  MessagePage,
  OverviewPage,
  QueuePage,
} from "./pages.tsx";
import { JobPage } from "./job_page.tsx";
import { DASHBOARD_CSS, LIVE_JS } from "./assets.ts";
import { SessionStore } from "./session.ts";
import { clientKey, loginLimit } from "./login_limit.ts";
import { idString } from "../http/ids.ts";

/** The session cookie's name. */
export const SESSION_COOKIE = "textstack_admin";
/** How long a login lasts, in seconds. */
export const SESSION_SECONDS = 12 * 3600;
/** Jobs per page on a queue's page. */
export const PAGE_SIZE = 50;
/**
 * Largest `/admin` request body, in bytes (413 above it, before it is read): the sign-in form and
 * the retry button are far smaller, and the sign-in form is open to anyone who reaches the port.
 */
export const ADMIN_MAX_BODY_BYTES = 4 * 1024;

/** The process state behind "who holds the lock": a queue lock's live view (lib/lock.ts). */
export interface LockState {
  readonly held: boolean;
  readonly backendPid: number | undefined;
}

/** What {@linkcode adminRoutes} needs. */
export interface AdminDeps extends EventStreamDeps {
  /** The token the login form takes. */
  token: string;
  views: readonly QueueView[];
  cache: StatsCache;
  /** Context for the admin retry (pool, log, events). */
  ctx: QueueContext;
  /** Pauses and cancel requests (lib/control.ts). */
  control: Pick<QueueControl, "pause" | "resume" | "state" | "requestCancel">;
  /** This process's lock per queue name (only the queues it consumes). */
  locks: ReadonlyMap<string, LockState>;
  /** Which instance this is and what it consumes, shown on the overview. */
  instance?: InstanceInfo;
  /**
   * The sign-in rate limit (lib/admin/login_limit.ts): refused sign-ins per address per window;
   * the defaults unless a test sets them.
   */
  loginLimit?: { attempts?: number; windowMs?: number };
  /**
   * `ADMIN_ORIGIN`: the origin the dashboard is reached at through a public name or a proxy, e.g.
   * `https://ops.example.com`; its host joins the Host allow-list and it passes the CSRF check.
   */
  origin?: string;
}

// The loopback names, with any port: what a browser on this machine (or on the host of a
// container whose port is published) sends as Host.
const LOOPBACK_HOST = /^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/i;

/**
 * Whether `/admin` answers a request with this Host: a loopback name with any port, or the host
 * (and port) of `ADMIN_ORIGIN`. Anything else is a name this worker was not set up to be
 * reached at, such as a DNS-rebinding page's own name, whose Host and Origin would agree and so
 * pass a same-origin CSRF check.
 *
 * @param host the request's Host header (or the host of its URL).
 * @param origin `ADMIN_ORIGIN`, if set.
 */
export function adminHostAllowed(host: string, origin?: string): boolean {
  if (LOOPBACK_HOST.test(host)) return true;
  return origin !== undefined && host.toLowerCase() === new URL(origin).host.toLowerCase();
}

// A job id: 1 to the bigint maximum, as the /internal routes accept (lib/http/ids.ts).
const idParam = idString;

/**
 * Build the dashboard's routes, to mount at the root (`createApi({ apps: [admin] })`).
 *
 * @returns a Hono app serving `/admin/*`.
 * @example
 * const admin = adminRoutes({ token, views, cache, ctx, locks, events, lifecycle, log });
 */
export function adminRoutes(deps: AdminDeps): Hono {
  const app = new Hono();
  const byName = new Map(
    deps.views.flatMap((v) => [v.name, ...(v.aliases ?? [])].map((name) => [name, v] as const)),
  );
  const views = deps.views;
  // A key of its own: a leaked cookie signature says nothing about the token.
  const secret = crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`textstack-admin-session\u0000${deps.token}`),
  );
  let streams = 0;
  const sessions = new SessionStore(SESSION_SECONDS * 1000);

  // The session id in the request's cookie, when its signature holds (else undefined).
  const sessionId = async (c: Parameters<MiddlewareHandler>[0]): Promise<string | undefined> => {
    const value = await getSignedCookie(c, await secret, SESSION_COOKIE);
    return typeof value === "string" ? value : undefined;
  };
  const signedIn = async (c: Parameters<MiddlewareHandler>[0]): Promise<boolean> =>
    sessions.valid(await sessionId(c));

  // Before anything reads a body (the sign-in form needs no session): a body past the limit is
  // refused unread, as the 64 KiB limit under /internal.
  const limit = bodyLimit({
    maxSize: ADMIN_MAX_BODY_BYTES,
    onError: (c) =>
      c.html(
        <MessagePage
          title="Too large"
          message={`The request body exceeds ${ADMIN_MAX_BODY_BYTES} bytes`}
        />,
        413,
      ),
  });
  // First, so every answer under /admin carries them: a CSP that allows only this
  // origin's own files (the style and the live script are served below, never inline), no
  // framing (clickjacking the retry button), no sniffing. HSTS is left to the https proxy: the
  // worker itself speaks plain http.
  const secure = secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'"],
      connectSrc: ["'self'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
      baseUri: ["'none'"],
    },
    xFrameOptions: "DENY",
    strictTransportSecurity: false,
  });
  app.use("/admin/*", secure);
  app.use("/admin", secure);
  app.use("/admin/*", limit);
  app.use("/admin", limit);
  // Before the CSRF check: the check compares Origin with the request's own URL, which the Host
  // header makes; only a Host on the allow-list makes that comparison mean "this dashboard".
  const hostCheck: MiddlewareHandler = async (c, next) => {
    const host = c.req.header("host") ?? new URL(c.req.url).host;
    if (adminHostAllowed(host, deps.origin)) return await next();
    return c.html(
      <MessagePage
        title="Wrong host"
        message="This dashboard answers on localhost only, or at the origin set in ADMIN_ORIGIN"
      />,
      403,
    );
  };
  app.use("/admin/*", hostCheck);
  app.use("/admin", hostCheck);
  // Same origin as the request's URL (its Host is allowed above), or ADMIN_ORIGIN itself: behind
  // an https proxy the browser's Origin is https:// while the worker is reached over http.
  const sameOrigin = csrf({
    origin: (origin, c) => origin === new URL(c.req.url).origin || origin === deps.origin,
  });
  app.use("/admin/*", sameOrigin);
  app.use("/admin", sameOrigin);

  // The style and the script, before the session check: the sign-in page is styled too.
  const asset = (body: string, type: string) => (c: Parameters<MiddlewareHandler>[0]) =>
    c.body(body, 200, { "content-type": type, "cache-control": "no-cache" });
  app.get("/admin/assets/dashboard.css", asset(DASHBOARD_CSS, "text/css; charset=utf-8"));
  app.get("/admin/assets/live.js", asset(LIVE_JS, "text/javascript; charset=utf-8"));

  app.get("/admin/login", async (c) => {
    if (await signedIn(c)) return c.redirect("/admin", 303);
    return c.html(<LoginPage />);
  });

  // Refused sign-ins are counted per client address; past the limit, 429 with Retry-After, so
  // guessing the token is bounded.
  const limited = loginLimit({
    ...deps.loginLimit,
    onLimited: (c, client) => {
      deps.log.warn(
        { client, retryAfterS: Number(c.res.headers.get("retry-after")) },
        "admin login rate-limited",
      );
      return c.html(
        <MessagePage
          title="Too many sign-in attempts"
          message={`Too many refused sign-ins from this address: try again in ${
            c.res.headers.get("retry-after")
          } s`}
        />,
        429,
      );
    },
  });

  app.post("/admin/login", limited, async (c) => {
    const form = await c.req.parseBody();
    const given = typeof form.token === "string" ? form.token : "";
    if (!(await timingSafeEqual(given, deps.token))) {
      deps.log.warn(
        { client: clientKey(c), forwardedFor: c.req.header("x-forwarded-for") ?? null },
        "admin login refused",
      );
      return c.html(<LoginPage error="Wrong token" />, 401);
    }
    await setSignedCookie(
      c,
      SESSION_COOKIE,
      sessions.create(),
      await secret,
      {
        httpOnly: true,
        sameSite: "Strict",
        path: "/admin",
        maxAge: SESSION_SECONDS,
        secure: new URL(c.req.url).protocol === "https:" ||
          c.req.header("x-forwarded-proto") === "https",
      },
    );
    return c.redirect("/admin", 303);
  });

  // Everything below needs the session cookie.
  const requireSession: MiddlewareHandler = async (c, next) => {
    if (await signedIn(c)) return await next();
    if (c.req.method === "GET" && c.req.path !== "/admin/events") {
      return c.redirect("/admin/login", 303);
    }
    return c.html(<MessagePage title="Sign in first" message="Your session has ended." />, 401);
  };
  app.use("/admin", requireSession);
  app.use("/admin/*", requireSession);

  // Ends the session itself, not only the browser's copy of it: the old cookie opens nothing.
  app.post("/admin/logout", async (c) => {
    sessions.revoke(await sessionId(c));
    deleteCookie(c, SESSION_COOKIE, { path: "/admin" });
    return c.redirect("/admin/login", 303);
  });

  app.get("/admin", (c) =>
    c.html(
      <OverviewPage
        views={views}
        snapshot={deps.cache.snapshot}
        intervalMs={deps.cache.intervalMs}
        holdsLock={(queue, pid) => deps.locks.get(queue)?.backendPid === pid}
        instance={deps.instance}
        paused={(queue) => deps.control.state(queue).paused}
      />,
    ));

  app.get("/admin/events", (c) => streamEvents(c, deps, `admin subscriber ${++streams}`));

  const notFound = (message: string) => (
    <MessagePage views={views} title="Not found" message={message} />
  );

  app.get("/admin/queues/:queue", async (c) => {
    const view = byName.get(c.req.param("queue"));
    if (!view) return c.html(notFound(`No queue named "${c.req.param("queue")}"`), 404);
    const status = c.req.query("status") || undefined;
    const before = c.req.query("before") || undefined;
    const q = c.req.query("q") || undefined;
    if (q && q.length > 200) {
      return c.html(
        <MessagePage views={views} title="Bad search" message="q is at most 200 characters" />,
        400,
      );
    }
    if (status && !view.statuses.includes(status)) {
      return c.html(
        <MessagePage
          views={views}
          title="Bad filter"
          message={`Unknown status "${status}": expected one of ${view.statuses.join(", ")}`}
        />,
        400,
      );
    }
    if (before && !idParam.safeParse(before).success) {
      return c.html(
        <MessagePage views={views} title="Bad page" message="before must be a job id" />,
        400,
      );
    }
    const rows = await view.listJobs(deps.ctx.sql, {
      status,
      q,
      beforeId: before,
      limit: PAGE_SIZE + 1,
    });
    const jobs = rows.slice(0, PAGE_SIZE);
    const notice = c.req.query("paused") === "1"
      ? "Paused: no instance claims this queue's jobs; a running job finishes."
      : c.req.query("resumed") === "1"
      ? "Resumed: the queue's jobs are claimed again."
      : c.req.query("bulk") !== undefined
      ? `Bulk retry: ${c.req.query("bulk")} jobs queued again.`
      : undefined;
    return c.html(
      <QueuePage
        views={views}
        view={view}
        status={status}
        q={q}
        paused={deps.control.state(view.name)}
        notice={notice}
        jobs={jobs}
        olderThan={rows.length > PAGE_SIZE ? jobs[jobs.length - 1].id : undefined}
        paged={before !== undefined}
      />,
    );
  });

  app.get("/admin/queues/:queue/jobs/:id", async (c) => {
    const view = byName.get(c.req.param("queue"));
    const id = c.req.param("id");
    if (!view) return c.html(notFound(`No queue named "${c.req.param("queue")}"`), 404);
    const job = idParam.safeParse(id).success ? await view.getJob(deps.ctx.sql, id) : null;
    if (!job) return c.html(notFound(`No ${view.name} job #${id}`), 404);
    const details = view.details ? await view.details(deps.ctx.sql, job) : [];
    const notice = c.req.query("retried") === "1"
      ? <p class="note" role="status">Retried: the job is queued again.</p>
      : c.req.query("cancelled") === "1"
      ? <p class="note" role="status">Cancelled: the job is Failed (cancelled by admin).</p>
      : c.req.query("cancelled") === "requested"
      ? <p class="note" role="status">Cancel requested: the run is stopping.</p>
      : undefined;
    return c.html(
      <JobPage views={views} view={view} job={job} details={details} notice={notice} />,
    );
  });

  app.post("/admin/queues/:queue/jobs/:id/retry", async (c) => {
    const view = byName.get(c.req.param("queue"));
    const id = c.req.param("id");
    if (!view?.retry || !idParam.safeParse(id).success) {
      return c.html(notFound("No such job, or its queue has no retry"), 404);
    }
    const outcome = await view.retry(deps.ctx, id);
    if (outcome.retried) {
      deps.log.info({ queue: view.name, id }, "admin retry from the dashboard");
      return c.redirect(`/admin/queues/${view.name}/jobs/${id}?retried=1`, 303);
    }
    const job = await view.getJob(deps.ctx.sql, id);
    if (!job) return c.html(notFound(`No ${view.name} job #${id}`), 404);
    return c.html(
      <MessagePage
        views={views}
        title="Cannot retry"
        message={`Cannot retry job #${id}: it is ${job.status}; ${outcome.reason}`}
      />,
      409,
    );
  });

  app.post("/admin/queues/:queue/jobs/:id/cancel", async (c) => {
    const view = byName.get(c.req.param("queue"));
    const id = c.req.param("id");
    if (!view?.cancel || !idParam.safeParse(id).success) {
      return c.html(notFound("No such job, or its queue has no cancel"), 404);
    }
    const outcome = await view.cancel(deps.ctx, id, deps.control);
    if (outcome.outcome === "absent") return c.html(notFound(`No ${view.name} job #${id}`), 404);
    if (outcome.outcome === "cancelled" || outcome.outcome === "requested") {
      deps.log.info({ queue: view.name, id, outcome: outcome.outcome }, "admin cancel");
      const done = outcome.outcome === "cancelled" ? "1" : "requested";
      return c.redirect(`/admin/queues/${view.name}/jobs/${id}?cancelled=${done}`, 303);
    }
    const job = outcome.job as { status?: unknown };
    return c.html(
      <MessagePage
        views={views}
        title="Cannot cancel"
        message={outcome.outcome === "running_host"
          ? `Cannot cancel job #${id}: it is ${job.status} on the host, whose step may already ` +
            "have acted"
          : `Cannot cancel job #${id}: it is ${job.status} already`}
      />,
      409,
    );
  });

  for (const [action, pause] of [["pause", true], ["resume", false]] as const) {
    app.post(`/admin/queues/:queue/${action}`, async (c) => {
      const view = byName.get(c.req.param("queue"));
      if (!view) return c.html(notFound(`No queue named "${c.req.param("queue")}"`), 404);
      if (pause) await deps.control.pause(view.name);
      else await deps.control.resume(view.name);
      return c.redirect(`/admin/queues/${view.name}?${pause ? "paused" : "resumed"}=1`, 303);
    });
  }

  // The bulk retry: GET shows how many Failed jobs match (nothing changes), POST re-queues them.
  const bulkQuery = (c: Parameters<MiddlewareHandler>[0], q: unknown) => {
    const view = byName.get(c.req.param("queue") ?? "");
    const text = typeof q === "string" && q !== "" ? q : undefined;
    return { view, q: text, bad: text !== undefined && text.length > 200 };
  };
  app.get("/admin/queues/:queue/retry", async (c) => {
    const { view, q, bad } = bulkQuery(c, c.req.query("q"));
    if (!view?.bulkRetry) return c.html(notFound("No such queue, or it has no bulk retry"), 404);
    if (bad) {
      return c.html(
        <MessagePage views={views} title="Bad search" message="q is at most 200 characters" />,
        400,
      );
    }
    const counted = await view.bulkRetry(deps.ctx, { status: "Failed", q }, true);
    return c.html(<BulkRetryPage views={views} view={view} q={q} counted={counted} />);
  });
  app.post("/admin/queues/:queue/retry", async (c) => {
    const form = await c.req.parseBody();
    const { view, q, bad } = bulkQuery(c, form.q);
    if (!view?.bulkRetry) return c.html(notFound("No such queue, or it has no bulk retry"), 404);
    if (bad) {
      return c.html(
        <MessagePage views={views} title="Bad search" message="q is at most 200 characters" />,
        400,
      );
    }
    const outcome = await view.bulkRetry(deps.ctx, { status: "Failed", q }, false);
    deps.log.info({ queue: view.name, q, retried: outcome.retried }, "admin bulk retry");
    const search = q ? `&q=${encodeURIComponent(q)}` : "";
    return c.redirect(
      `/admin/queues/${view.name}?status=Failed${search}&bulk=${outcome.retried}`,
      303,
    );
  });

  return app;
}
