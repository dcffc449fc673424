// deno-lint-ignore-file jsx-key -- rendered once on the server; no client reconciles these lists
/**
 * The dashboard's pages, server-rendered with Hono JSX (no build step, no client templates).
 * Elements marked `data-live-region` (with an `id`) are what the page's few lines of script swap
 * in after a job event: it re-fetches the same URL and replaces each region by id (GoodJob's
 * live poll). Plain links, forms and buttons throughout, so the keyboard works.
 *
 * The style and the script are files the dashboard serves (lib/admin/assets.ts), never inline:
 * the pages' Content-Security-Policy allows only `'self'` (lib/admin/dashboard.tsx). One job's page
 * is lib/admin/job_page.tsx, in the {@linkcode Layout} here.
 *
 * @module
 */
import type { Child, FC } from "hono/jsx";
import type { JobSummary, QueueView } from "./queue_view.ts";
import type { StatsSnapshot } from "./stats_cache.ts";
import { redact } from "../redact.ts";
import type { PauseState } from "../control.ts";
import type { BulkRetryOutcome } from "../queue.ts";

const seconds = (ms: number): string => String(Math.round(ms / 100) / 10);

/** A timestamp as the pages show it, `2024-05-01 12:00:00Z`; "—" for anything not a `Date`. */
export const time = (value: unknown): string =>
  value instanceof Date ? value.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "—";

/**
 * The frame of every page: the header with the queues' links and the sign-out button (when
 * `views` is given), the title, and the live script when `live`.
 */
export const Layout: FC<
  { title: string; views?: readonly QueueView[]; live?: boolean; children?: Child }
> = (
  p,
) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>{p.title} · TextStack worker</title>
      <link rel="stylesheet" href="/admin/assets/dashboard.css" />
    </head>
    <body>
      <header>
        <strong>TextStack worker</strong>
        {p.views && (
          <nav aria-label="Queues">
            <a href="/admin">Overview</a>
            {p.views.map((v) => (
              <>
                {" · "}
                <a href={`/admin/queues/${v.name}`}>{v.name}</a>
              </>
            ))}
          </nav>
        )}
        {p.views && (
          <form method="post" action="/admin/logout">
            <button type="submit">Sign out</button>
          </form>
        )}
      </header>
      <main id="main">
        <h1>{p.title}</h1>
        {p.children}
      </main>
      {p.live && <script src="/admin/assets/live.js"></script>}
    </body>
  </html>
);

// A job error in a table cell: redacted (rows stored before lib/job_error.ts, or by a host
// poller, were not), then cut to 120 characters.
function shortError(error: string): string {
  const shown = redact(error);
  return shown.length > 120 ? `${shown.slice(0, 120)}…` : shown;
}

/** The login form; `error` is shown above it after a wrong token. */
export const LoginPage: FC<{ error?: string }> = ({ error }) => (
  <Layout title="Sign in">
    {error && <p class="note error" role="alert">{error}</p>}
    <form method="post" action="/admin/login">
      <p>
        <label for="token">Token (METRICS_TOKEN or INTERNAL_API_TOKEN)</label>
        <br />
        <input id="token" name="token" type="password" autocomplete="current-password" required />
      </p>
      <button type="submit">Sign in</button>
    </form>
  </Layout>
);

/** Which instance this is, for the dashboard and `/readyz`: several may share one database. */
export interface InstanceInfo {
  /** This process's per-boot id (the `claimed_by` of its claims). */
  readonly bootId: string;
  readonly pid: number;
  /** The machine's host name. */
  readonly host: string;
  /** The in-process queues this instance consumes (`QUEUES`). */
  readonly consumes: readonly string[];
}

/** Every queue: counts by status, oldest runnable age, lock holder, last hour's throughput. */
export const OverviewPage: FC<{
  views: readonly QueueView[];
  snapshot: StatsSnapshot | undefined;
  /** The background count's interval, in ms (`STATS_INTERVAL_MS`). */
  intervalMs: number;
  holdsLock: (queue: string, pid: number) => boolean;
  instance?: InstanceInfo;
  paused: (queue: string) => boolean;
}> = ({ views, snapshot, intervalMs, holdsLock, instance, paused }) => (
  <Layout title="Overview" views={views} live>
    <div id="overview" data-live-region>
      {instance && (
        <p data-instance>
          This instance: boot {instance.bootId}, pid {instance.pid} on {instance.host}; consumes
          {" "}
          {instance.consumes.length ? instance.consumes.join(", ") : "no queue"} (QUEUES).
        </p>
      )}
      <p class="muted">
        Counts as of{" "}
        {snapshot ? time(snapshot.at) : "— (first count pending)"}, refreshed in the background
        about every {seconds(intervalMs)} s.
      </p>
      <table>
        <caption>Queues</caption>
        <thead>
          <tr>
            <th scope="col">Queue</th>
            <th scope="col">Jobs by status</th>
            <th scope="col">Oldest runnable</th>
            <th scope="col">Lock held by</th>
            <th scope="col">Last hour</th>
            <th scope="col">Claims</th>
          </tr>
        </thead>
        <tbody>
          {views.map((v) => {
            const q = snapshot?.queues.get(v.name);
            const age = q?.stats.oldestRunnableAgeS;
            return (
              <tr data-queue={v.name}>
                <th scope="row">
                  <a href={`/admin/queues/${v.name}`}>{v.name}</a>
                </th>
                <td>
                  {v.statuses.map((s, i) => (
                    <>
                      {i > 0 && " · "}
                      <a href={`/admin/queues/${v.name}?status=${s}`}>
                        {s}: <span data-count={s}>{q?.stats.byStatus[s] ?? "—"}</span>
                      </a>
                    </>
                  ))}
                </td>
                <td>{age == null ? "none" : `${age.toFixed(1)} s`}</td>
                <td data-lock>
                  {v.consumer === "host"
                    ? "host poller (claim API, no lock)"
                    : q?.holder
                    ? `pid ${q.holder.pid} (${q.holder.application}${
                      q.holder.client ? ` from ${q.holder.client}` : ""
                    }, since ${time(q.holder.since)})${
                      holdsLock(v.name, q.holder.pid) ? " — this process" : " — another instance"
                    }`
                    : "nobody"}
                  {v.consumer === "worker" && instance && !instance.consumes.includes(v.name) &&
                    " (not consumed here)"}
                </td>
                <td>
                  {q ? `${q.lastHour.completed} completed, ${q.lastHour.failed} failed` : "—"}
                </td>
                <td data-paused={String(paused(v.name))}>
                  {paused(v.name) ? <span class="paused">paused</span> : "running"}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  </Layout>
);

/** One queue's jobs, newest first, filtered by status and search, paged by id; its actions. */
export const QueuePage: FC<{
  views: readonly QueueView[];
  view: QueueView;
  status: string | undefined;
  q: string | undefined;
  paused: PauseState;
  notice: string | undefined;
  jobs: JobSummary[];
  olderThan: string | undefined;
  paged: boolean;
}> = ({ views, view, status, q, paused, notice, jobs, olderThan, paged }) => {
  const base = `/admin/queues/${view.name}`;
  const filter = new URLSearchParams();
  if (status) filter.set("status", status);
  if (q) filter.set("q", q);
  const withFilter = (extra: Record<string, string>) => {
    const params = new URLSearchParams(filter);
    for (const [k, v] of Object.entries(extra)) params.set(k, v);
    const text = params.toString();
    return text ? `${base}?${text}` : base;
  };
  return (
    <Layout title={`Queue ${view.name}`} views={views} live>
      {notice && <p class="note" role="status">{notice}</p>}
      <div class="actions" id="queue-actions" data-live-region>
        <span data-queue-paused={String(paused.paused)}>
          {paused.paused
            ? <span class="paused">Paused since {time(paused.paused_at)}</span>
            : "Claiming jobs"}
        </span>
        <form method="post" action={`${base}/${paused.paused ? "resume" : "pause"}`}>
          <button type="submit">{paused.paused ? "Resume" : "Pause"} {view.name}</button>
        </form>
        {view.bulkRetry && (
          <a href={`${base}/retry${q ? `?q=${encodeURIComponent(q)}` : ""}`}>
            Retry the Failed jobs{q ? ` matching “${q}”` : ""}…
          </a>
        )}
      </div>
      <form method="get" action={base}>
        <label for="status">Status</label>{" "}
        <select id="status" name="status">
          <option value="" selected={!status}>every status</option>
          {view.statuses.map((s) => <option value={s} selected={s === status}>{s}</option>)}
        </select>{" "}
        <label for="q">Search</label>{" "}
        <input id="q" name="q" type="search" value={q ?? ""} maxlength={200} />{" "}
        <button type="submit">Filter</button>
      </form>
      <div id="jobs" data-live-region>
        <table>
          <caption>
            {status ? `${status} jobs` : "Jobs"}
            {q ? ` matching “${q}”` : ""}, newest first{paged ? " (older page)" : ""}
          </caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Subject</th>
              <th scope="col">Error</th>
              <th scope="col">Created</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {jobs.length === 0 && (
              <tr>
                <td colspan={7}>No jobs</td>
              </tr>
            )}
            {jobs.map((j) => (
              <tr data-job={j.id} data-status={j.status}>
                <td>
                  <a href={`${base}/jobs/${j.id}`}>#{j.id}</a>
                </td>
                <td class={`status ${j.status}`}>{j.status}</td>
                <td>{j.attempt_count}</td>
                <td>{j.subject}</td>
                <td>{j.error && shortError(j.error)}</td>
                <td>{time(j.created_at)}</td>
                <td>{time(j.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <nav aria-label="Pages">
          {paged && <a href={withFilter({})}>Newest</a>}
          {paged && olderThan && " · "}
          {olderThan && <a href={withFilter({ before: olderThan })}>Older</a>}
        </nav>
      </div>
    </Layout>
  );
};

/** The bulk retry's confirmation: how many `Failed` jobs match, and the button that retries them. */
export const BulkRetryPage: FC<{
  views: readonly QueueView[];
  view: QueueView;
  q: string | undefined;
  counted: BulkRetryOutcome;
}> = ({ views, view, q, counted }) => {
  const base = `/admin/queues/${view.name}`;
  const over = counted.truncated;
  return (
    <Layout title={`Retry ${view.name} jobs`} views={views}>
      <p>
        <a href={`${base}?status=Failed${q ? `&q=${encodeURIComponent(q)}` : ""}`}>
          ← the Failed jobs
        </a>
      </p>
      <p data-matched={String(counted.matched)}>
        {over ? `More than ${counted.matched - 1}` : counted.matched} Failed{" "}
        {counted.matched === 1 ? "job matches" : "jobs match"}
        {q ? ` “${q}”` : ""}. {over &&
          `One retry re-queues the newest ${counted.matched - 1}; run it again for the rest.`}
      </p>
      {counted.matched > 0 && (
        <form method="post" action={`${base}/retry`}>
          {q && <input type="hidden" name="q" value={q} />}
          <button type="submit">Retry {over ? counted.matched - 1 : counted.matched} jobs</button>
        </form>
      )}
    </Layout>
  );
};

/** A short page for a refused action or a missing thing. */
export const MessagePage: FC<{ views?: readonly QueueView[]; title: string; message: string }> = (
  p,
) => (
  <Layout title={p.title} views={p.views}>
    <p class="note error" role="alert">{p.message}</p>
    <p>
      <a href="/admin">Back to the overview</a>
    </p>
  </Layout>
);
