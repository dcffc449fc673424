// deno-lint-ignore-file jsx-key -- rendered once on the server; no client reconciles these lists
/**
 * The dashboard's pages, server-rendered with Hono JSX (no build step, no client templates).
 * Elements marked `data-live-region` (with an `id`) are what the page's few lines of script swap
 * in after a job event: it re-fetches the same URL and replaces each region by id (GoodJob's
 * live poll). Plain links, forms and buttons throughout, so the keyboard works.
 *
 * The style and the script are files the dashboard serves ({@linkcode DASHBOARD_CSS},
 * {@linkcode LIVE_JS}), never inline: the pages' Content-Security-Policy allows only `'self'`
 * (lib/admin/dashboard.tsx).
 *
 * @module
 */
import type { Child, FC } from "hono/jsx";
import type { JobDetail, JobSummary, QueueView } from "./queue_view.ts";
import { RETRYABLE_STATUS } from "./queue_view.ts";
import type { StatsSnapshot } from "./stats_cache.ts";
import { redact } from "../redact.ts";
import type { PauseState } from "../control.ts";
import type { BulkRetryOutcome } from "../queue.ts";

/** The dashboard's style sheet, served at `/admin/assets/dashboard.css`. */
export const DASHBOARD_CSS = `
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1f2a44;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;align-items:center}
header a{color:#fff}header form{margin-left:auto}
main{padding:1rem 1.2rem;max-width:72rem}
table{border-collapse:collapse;margin:.5rem 0 1.2rem;background:#fff}
th,td{border:1px solid #d0d4dc;padding:.3rem .6rem;text-align:left;vertical-align:top}
caption{text-align:left;font-weight:600;padding:.3rem 0}
.status{font-weight:600}.Failed{color:#a4000f}.Completed{color:#0a6b2a}.Processing,.Running{color:#8a5300}
a:focus,button:focus,select:focus,input:focus{outline:3px solid #ffbf47;outline-offset:1px}
button{font:inherit;padding:.3rem .8rem}pre{white-space:pre-wrap;background:#fff;border:1px solid #d0d4dc;padding:.5rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;background:#fff;padding:.6rem;border:1px solid #d0d4dc}
dt{font-weight:600}.note{padding:.4rem .6rem;background:#e8f0fe;border:1px solid #9db7f5}
.error{background:#fde8e8;border-color:#e29595}.muted{color:#5c6270}
.actions{display:flex;gap:.8rem;align-items:center;flex-wrap:wrap;margin:.5rem 0}
.paused{color:#8a5300;font-weight:600}`;

// Re-fetch this page on a job event (debounced) and swap each live region by id. The stream is
// the dashboard's own, behind the login cookie: EventSource cannot send a bearer token. On
// `ready` (the subscription exists; also after a reconnect) it refreshes once, so an event that
// fell between rendering this page and subscribing is not missed. A refresh that an earlier one
// overtook is dropped, so a slow answer never puts older content back.
/** The live-update script, served at `/admin/assets/live.js`. */
export const LIVE_JS = `(() => {
  let timer, latest = 0;
  async function refresh() {
    const mine = ++latest;
    const res = await fetch(location.href, { headers: { accept: "text/html" } });
    if (!res.ok || mine !== latest) return;
    const next = new DOMParser().parseFromString(await res.text(), "text/html");
    if (mine !== latest) return;
    for (const region of document.querySelectorAll("[data-live-region]")) {
      const fresh = next.getElementById(region.id);
      if (fresh) region.replaceWith(fresh);
    }
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  }
  const soon = () => { clearTimeout(timer); timer = setTimeout(refresh, 200); };
  const events = new EventSource("/admin/events");
  for (const name of ["claimed", "completed", "failed", "given_back", "recovered", "retried", "cancelled", "reset"]) {
    events.addEventListener(name, soon);
  }
  events.addEventListener("ready", () => { document.body.dataset.live = "ready"; soon(); });
})();`;

const seconds = (ms: number): string => String(Math.round(ms / 100) / 10);

const time = (value: unknown): string =>
  value instanceof Date ? value.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "—";

// An attempt's times, as the trigger stored them (ISO text with an offset).
const isoTime = (value: unknown): string =>
  typeof value === "string" && !Number.isNaN(Date.parse(value)) ? time(new Date(value)) : "—";

/** One ended attempt as the job row holds it (sql/010_operations.sql). */
interface AttemptRow {
  attempt: number;
  started_at: string | null;
  ended_at: string;
  outcome: string;
  error: string | null;
}

const Layout: FC<
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

/** One job: its fields, error, attempts and timestamps, the queue's details, the retry button. */
export const JobPage: FC<{
  views: readonly QueueView[];
  view: QueueView;
  job: Record<string, unknown>;
  details: JobDetail[];
  notice?: Child;
}> = ({ views, view, job, details, notice }) => {
  const id = String(job.id);
  const canRetry = view.retry !== undefined && job.status === RETRYABLE_STATUS;
  // Runnable jobs can be cancelled anywhere; a running one only in an in-process queue.
  const runnable = job.status === "Queued" || job.status === "Pending";
  const running = job.status === "Processing" || job.status === "Running";
  const canCancel = view.cancel !== undefined &&
    (runnable || (running && view.consumer === "worker"));
  const attempts = Array.isArray(job.attempts) ? job.attempts as AttemptRow[] : [];
  return (
    <Layout title={`${view.name} job #${id}`} views={views} live>
      <p>
        <a href={`/admin/queues/${view.name}`}>← {view.name} jobs</a>
      </p>
      {notice}
      <div id="job" data-live-region>
        <p>
          Status:{" "}
          <strong class={`status ${job.status}`} data-status={String(job.status)}>
            {String(job.status)}
          </strong>{" "}
          · attempts: {String(job.attempt_count)}
        </p>
        {canRetry && (
          <form method="post" action={`/admin/queues/${view.name}/jobs/${id}/retry`}>
            <button type="submit">Retry job #{id}</button>
          </form>
        )}
        {canCancel && (
          <form method="post" action={`/admin/queues/${view.name}/jobs/${id}/cancel`}>
            <button type="submit">Cancel job #{id}</button>
          </form>
        )}
        <h2 id="attempts">Attempts</h2>
        <table aria-labelledby="attempts" data-attempts={String(attempts.length)}>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Started</th>
              <th scope="col">Ended</th>
              <th scope="col">Outcome</th>
              <th scope="col">Error</th>
            </tr>
          </thead>
          <tbody>
            {attempts.length === 0 && (
              <tr>
                <td colspan={5}>none ended yet</td>
              </tr>
            )}
            {attempts.map((a) => (
              <tr data-outcome={a.outcome}>
                <td>{a.attempt}</td>
                <td>{isoTime(a.started_at)}</td>
                <td>{isoTime(a.ended_at)}</td>
                <td>{a.outcome}</td>
                <td>{a.error ?? "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {job.error != null && (
          <>
            <h2>Error</h2>
            <pre>{redact(String(job.error))}</pre>
          </>
        )}
        <h2>Fields</h2>
        <dl>
          {Object.entries(job).filter(([key]) => key !== "attempts").map(([key, value]) => (
            <>
              <dt>{key}</dt>
              <dd>{value instanceof Date ? time(value) : value == null ? "—" : String(value)}</dd>
            </>
          ))}
        </dl>
        {details.map((d, i) => (
          <>
            <h2 id={`detail-${i}`}>{d.title}</h2>
            <table aria-labelledby={`detail-${i}`}>
              <thead>
                <tr>{d.columns.map((c) => <th scope="col">{c}</th>)}</tr>
              </thead>
              <tbody>
                {d.rows.length === 0 && (
                  <tr>
                    <td colspan={d.columns.length}>none</td>
                  </tr>
                )}
                {d.rows.map((r) => <tr>{r.map((cell) => <td>{cell ?? "—"}</td>)}</tr>)}
              </tbody>
            </table>
          </>
        ))}
      </div>
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
