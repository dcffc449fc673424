/**
 * The admin dashboard at `/admin`: an overview of every queue, a queue's jobs (by
 * status and search), one job with its attempt history, and the operator's actions: retry a
 * `Failed` job (ADR-022), cancel a runnable or running one, bulk-retry the `Failed` jobs matching
 * a search (their count shown before the operator confirms), pause and resume a queue
 * (lib/control.ts). Everything is read and written through each queue's {@linkcode QueueView};
 * counts come from the background {@linkcode StatsCache}, never counted per request.
 *
 * Auth (lib/admin/access.tsx): the token (`METRICS_TOKEN` when set, else `INTERNAL_API_TOKEN`) is
 * given once on the login form; the answer is a cookie holding a session id from this process's
 * session store (so signing out ends the session), signed with HMAC-SHA256 under a key derived
 * from the token (never the token itself), `HttpOnly`, `SameSite=Strict`, `Path=/admin`, and
 * `Secure` when the request came over https. Every form post also passes `hono/csrf` (its Origin
 * or `Sec-Fetch-Site: same-origin` must match, as Sidekiq's `safe_request?`). Live updates come
 * from `/admin/events`, the job event stream behind the same cookie. Sign-in is rate-limited per
 * client address (lib/admin/login_limit.ts). Every answer carries `hono/secure-headers`: a CSP of
 * this origin's own files only (the style and the script are served from `/admin/assets/`, never
 * inline) and `X-Frame-Options: DENY`.
 *
 * @module
 */
import { Hono, type MiddlewareHandler } from "hono";
import type { QueueContext } from "../queue.ts";
import type { QueueControl } from "../control.ts";
import type { QueueView } from "./queue_view.ts";
import type { StatsCache } from "./stats_cache.ts";
import { type EventStreamDeps, streamEvents } from "../http/api.ts";
import {
  BulkRetryPage,
  type InstanceInfo,
  MessagePage,
  OverviewPage,
  QueuePage,
} from "./pages.tsx";
import { JobPage } from "./job_page.tsx";
import { DASHBOARD_CSS, LIVE_JS } from "./assets.ts";
import { type AccessDeps, guardRequests, mountSignIn } from "./access.tsx";
import { idString } from "../http/ids.ts";

/** Jobs per page on a queue's page. */
export const PAGE_SIZE = 50;

/** The process state behind "who holds the lock": a queue lock's live view (lib/lock.ts). */
export interface LockState {
  readonly held: boolean;
  readonly backendPid: number | undefined;
}

/** What {@linkcode adminRoutes} needs. */
export interface AdminDeps extends EventStreamDeps, AccessDeps {
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
  let streams = 0;
  // First, so every answer under /admin carries them: security headers, the body limit, the Host
  // allow-list and the CSRF check (lib/admin/access.tsx).
  guardRequests(app, deps);

  // The style and the script, before the session check: the sign-in page is styled too.
  const asset = (body: string, type: string) => (c: Parameters<MiddlewareHandler>[0]) =>
    c.body(body, 200, { "content-type": type, "cache-control": "no-cache" });
  app.get("/admin/assets/dashboard.css", asset(DASHBOARD_CSS, "text/css; charset=utf-8"));
  app.get("/admin/assets/live.js", asset(LIVE_JS, "text/javascript; charset=utf-8"));

  // The sign-in and sign-out routes; everything after them needs the session cookie.
  mountSignIn(app, deps);

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
