// deno-lint-ignore-file jsx-key -- rendered once on the server; no client reconciles these lists
/**
 * One job's page on the dashboard: its status, the retry and cancel buttons its status allows, its
 * ended attempts (the job row's `attempts`), its error, every field, and the queue's own detail
 * tables ({@linkcode QueueView.details}). Framed by the layout every page shares
 * (lib/admin/pages.tsx).
 *
 * @module
 */
import type { Child, FC } from "hono/jsx";
import type { JobDetail, QueueView } from "./queue_view.ts";
import { RETRYABLE_STATUS } from "./queue_view.ts";
import { redact } from "../redact.ts";
import { Layout, time } from "./pages.tsx";

// An attempt's times, as the trigger stored them (ISO text with an offset).
const isoTime = (value: unknown): string =>
  typeof value === "string" && !Number.isNaN(Date.parse(value)) ? time(new Date(value)) : "—";

/** One ended attempt as the job row holds it (sql/012_operations.sql). */
interface AttemptRow {
  attempt: number;
  started_at: string | null;
  ended_at: string;
  outcome: string;
  error: string | null;
}

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
