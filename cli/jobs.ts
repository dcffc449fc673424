/**
 * `deno task jobs …`: the operator's command line over the worker's HTTP API (never the
 * database), one command per API action:
 *
 * ```
 * jobs queues                                   every queue: consumer, pause, state
 * jobs stats                                    every queue's counts by status, last hour
 * jobs list <queue> [--status S] [--q TEXT] [--limit N] [--cursor C]
 * jobs show <queue> <id>                        one job, with its attempt history
 * jobs retry <queue> <id>                       admin retry of a Failed job
 * jobs retry <queue> --status Failed [--q TEXT] [--yes]   bulk retry (count, confirm, retry)
 * jobs cancel <queue> <id>
 * jobs pause <queue> | jobs resume <queue>
 * ```
 *
 * `<queue>` is a queue's name: ingestion, user_ingestion, enrichment, ssg, auto_publish,
 * seo_backfill. `<id>` is what the queue's routes take: the job's id, or for user_ingestion and
 * enrichment the user book's. Options: `--url` (else `WORKER_URL`, else
 * `http://127.0.0.1:8787`), `--json` (the API's answer as JSON, for scripts), `--yes` (confirm a
 * bulk retry without asking). The token is `INTERNAL_API_TOKEN`, else the worker's generated
 * token file (`$DATA_DIR/internal_api_token`, `DATA_DIR` defaulting to `.data`).
 *
 * Exit codes: 0 done; 1 refused by the API (400, 409, a bulk retry not confirmed); 2 bad usage;
 * 3 no such job or queue (404); 4 not authorised (401: the token); 5 the worker cannot be reached
 * or failed (5xx).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { api, CliError, EXIT, token } from "./api.ts";

/** Where each queue's actions are in the API (under `/internal`), as its routes define them. */
interface QueueRoutes {
  list: string;
  item: (id: string) => string;
  /** The job inside the item's answer (user books answer `{ user_book, job, enrichment }`). */
  pick?: (body: Record<string, unknown>) => Record<string, unknown>;
  retry: (id: string) => string;
  cancel: (id: string) => string;
  bulk: string;
  /** The id the queue's routes take, from a listed row. */
  idOf?: (row: Record<string, unknown>) => string;
}

const jobs = (base: string): QueueRoutes => ({
  list: `${base}/jobs`,
  item: (id) => `${base}/jobs/${id}`,
  retry: (id) => `${base}/jobs/${id}/retry`,
  cancel: (id) => `${base}/jobs/${id}/cancel`,
  bulk: `${base}/jobs/retry`,
});

/** Every queue by name. */
export const QUEUES: Readonly<Record<string, QueueRoutes>> = {
  ingestion: jobs("/ingestion"),
  user_ingestion: {
    list: "/user-books",
    item: (id) => `/user-books/${id}`,
    pick: (body) => ({
      ...(body.job as Record<string, unknown>),
      user_book: body.user_book,
    }),
    retry: (id) => `/user-books/${id}/retry`,
    cancel: (id) => `/user-books/${id}/cancel`,
    bulk: "/user-books/retry",
    idOf: (row) => String(row.user_book_id),
  },
  enrichment: {
    list: "/enrichment",
    item: (id) => `/user-books/${id}`,
    pick: (body) => ({
      id: (body.user_book as Record<string, unknown>)?.id,
      ...(body.enrichment as Record<string, unknown>),
    }),
    retry: (id) => `/enrichment/${id}/retry`,
    cancel: (id) => `/enrichment/${id}/cancel`,
    bulk: "/enrichment/retry",
  },
  ssg: jobs("/ssg"),
  auto_publish: jobs("/auto-publish"),
  seo_backfill: jobs("/seo"),
};

const USAGE = `Usage: deno task jobs <command> [options]
  queues                                   every queue: consumer, pause, state
  stats                                    every queue's counts by status
  list <queue> [--status S] [--q TEXT] [--limit N] [--cursor C]
  show <queue> <id>
  retry <queue> <id>
  retry <queue> --status Failed [--q TEXT] [--yes]
  cancel <queue> <id>
  pause <queue>
  resume <queue>
Queues: ${Object.keys(QUEUES).join(", ")}
Options: --url URL (or WORKER_URL), --json, --yes; token: INTERNAL_API_TOKEN or $DATA_DIR/internal_api_token`;

/** What {@linkcode main} reads from its surroundings; a test passes its own. */
export interface CliEnv {
  env: Readonly<Record<string, string | undefined>>;
  out: (line: string) => void;
  err: (line: string) => void;
  /** Asks a yes/no question at a terminal; null when stdin is not one. */
  confirm: ((question: string) => boolean) | null;
}

const cell = (value: unknown): string => {
  if (value === null || value === undefined) return "—";
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  const line = text.replace(/\s+/g, " ");
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
};

/** A plain-text table: a header, a rule, one line per row, columns padded to fit. */
export function table(columns: string[], rows: unknown[][]): string[] {
  const cells = rows.map((r) => r.map(cell));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((v, i) => v.padEnd(widths[i])).join("  ").trimEnd();
  return [line(columns), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)];
}

function queueRoutes(name: string | undefined): [string, QueueRoutes] {
  if (!name) throw new CliError(`Missing <queue>\n${USAGE}`, EXIT.usage);
  const routes = QUEUES[name];
  if (!routes) {
    throw new CliError(
      `No queue named "${name}": expected one of ${Object.keys(QUEUES).join(", ")}`,
      EXIT.usage,
    );
  }
  return [name, routes];
}

/** Largest id the API takes (PostgreSQL bigint). */
const MAX_ID = 9223372036854775807n;

function jobId(id: string | undefined): string {
  if (!id || !/^[1-9]\d{0,18}$/.test(id) || BigInt(id) > MAX_ID) {
    throw new CliError(
      `Expected a job id (a positive integer up to ${MAX_ID}), got ${JSON.stringify(id ?? "")}`,
      EXIT.usage,
    );
  }
  return id;
}

/** The most positional arguments each command takes after its name (`retry`: an id or none). */
const ARITY: Readonly<Record<string, number>> = {
  queues: 0,
  stats: 0,
  list: 1,
  show: 2,
  retry: 2,
  cancel: 2,
  pause: 1,
  resume: 1,
};

/**
 * Run one command.
 *
 * @returns the exit code.
 */
export async function main(args: string[], io: CliEnv): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        url: { type: "string" },
        json: { type: "boolean", default: false },
        yes: { type: "boolean", default: false },
        status: { type: "string" },
        q: { type: "string" },
        limit: { type: "string" },
        cursor: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (err) {
    io.err(`${err instanceof Error ? err.message : err}\n${USAGE}`);
    return EXIT.usage;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    (values.help ? io.out : io.err)(USAGE);
    return values.help ? EXIT.ok : EXIT.usage;
  }
  try {
    const base = (values.url ?? io.env.WORKER_URL ?? "http://127.0.0.1:8787").replace(/\/+$/, "");
    if (!/^https?:\/\//.test(base)) {
      throw new CliError(`--url or WORKER_URL must be an http(s) URL, got "${base}"`, EXIT.usage);
    }
    const most = ARITY[command];
    if (most !== undefined && rest.length > most) {
      throw new CliError(
        `Unexpected argument ${JSON.stringify(rest[most])}: ${command} takes ${
          most === 0 ? "none" : `at most ${most}`
        }\n${USAGE}`,
        EXIT.usage,
      );
    }
    const call = api(base, await token(io.env));
    const print = (json: unknown, lines: () => string[]) => {
      if (values.json) io.out(JSON.stringify(json, null, 2));
      else for (const line of lines()) io.out(line);
    };
    switch (command) {
      case "queues":
      case "stats": {
        const { body } = await call("GET", "/queues");
        const queues = body.queues as Record<string, unknown>[];
        if (command === "queues") {
          print(queues, () =>
            table(
              ["queue", "consumer", "paused", "state"],
              queues.map((
                q,
              ) => [q.name, q.consumer, q.paused ? "paused" : "no", q.state ?? "host"]),
            ));
        } else {
          print(body, () => [
            ...table(
              ["queue", "jobs by status", "oldest runnable", "last hour", "paused"],
              queues.map((q) => [
                q.name,
                q.jobs
                  ? Object.entries(q.jobs as Record<string, number>).map(([s, n]) => `${s} ${n}`)
                    .join(", ")
                  : "—",
                q.oldest_runnable_age_s == null
                  ? "none"
                  : `${Number(q.oldest_runnable_age_s).toFixed(1)} s`,
                q.last_hour
                  ? `${(q.last_hour as Record<string, number>).completed} completed, ${
                    (q.last_hour as Record<string, number>).failed
                  } failed`
                  : "—",
                q.paused ? "paused" : "no",
              ]),
            ),
            `counted at ${body.at ?? "— (first count pending)"}`,
          ]);
        }
        return EXIT.ok;
      }
      case "list": {
        const [name, routes] = queueRoutes(rest[0]);
        const query = new URLSearchParams();
        for (const key of ["status", "q", "limit", "cursor"] as const) {
          if (values[key] !== undefined) query.set(key, values[key]!);
        }
        const qs = query.toString();
        const { body } = await call("GET", `${routes.list}${qs ? `?${qs}` : ""}`);
        const rows = body.jobs as Record<string, unknown>[];
        print(body, () => [
          ...table(
            ["id", "status", "attempts", "subject", "error", "updated"],
            rows.map((r) => [
              routes.idOf?.(r) ?? r.id,
              r.status,
              r.attempt_count,
              r.subject,
              r.error,
              r.updated_at,
            ]),
          ),
          rows.length === 0 ? `no ${name} jobs` : `${rows.length} ${name} jobs`,
          ...(body.next_cursor ? [`more: --cursor ${body.next_cursor}`] : []),
        ]);
        return EXIT.ok;
      }
      case "show": {
        const [, routes] = queueRoutes(rest[0]);
        const id = jobId(rest[1]);
        const { body } = await call("GET", routes.item(id));
        const job = routes.pick ? routes.pick(body) : body;
        const attempts = Array.isArray(job.attempts)
          ? job.attempts as Record<string, unknown>[]
          : [];
        print(job, () => {
          const fields = Object.entries(job).filter(([k]) => k !== "attempts");
          const width = Math.max(...fields.map(([k]) => k.length));
          return [
            ...fields.map(([k, v]) => `${k.padEnd(width)}  ${cell(v)}`),
            "",
            "attempts:",
            ...(attempts.length === 0 ? ["  none ended yet"] : table(
              ["#", "started", "ended", "outcome", "error"],
              attempts.map((a) => [a.attempt, a.started_at, a.ended_at, a.outcome, a.error]),
            ).map((l) => `  ${l}`)),
          ];
        });
        return EXIT.ok;
      }
      case "retry": {
        const [name, routes] = queueRoutes(rest[0]);
        if (rest[1] !== undefined) {
          const { body } = await call("POST", routes.retry(jobId(rest[1])));
          print(body, () => [`${name} ${rest[1]}: ${body.status ?? "retried"}`]);
          return EXIT.ok;
        }
        if (values.status !== "Failed") {
          throw new CliError(
            "A bulk retry takes --status Failed (only Failed jobs can be retried); or give an <id>",
            EXIT.usage,
          );
        }
        const filter = { status: "Failed", ...(values.q ? { q: values.q } : {}) };
        const counted = (await call("POST", routes.bulk, { ...filter, dry_run: true })).body;
        const matched = Number(counted.matched);
        const limit = Number(counted.limit);
        const what = `${matched > limit ? `more than ${limit}` : matched} Failed ${name} jobs` +
          (values.q ? ` matching "${values.q}"` : "");
        if (matched === 0) {
          print(counted, () => [`no Failed ${name} jobs${values.q ? ` match "${values.q}"` : ""}`]);
          return EXIT.ok;
        }
        if (!values.yes) {
          if (!io.confirm) {
            throw new CliError(`${what}: add --yes to retry them`, EXIT.refused);
          }
          if (!io.confirm(`Retry ${what}?`)) {
            throw new CliError("Not confirmed: nothing retried", EXIT.refused);
          }
        }
        const { body } = await call("POST", routes.bulk, filter);
        print(body, () => [
          `retried ${body.retried} of ${what}` +
          (Number(body.skipped) > 0 ? `; ${body.skipped} left Failed by the queue's rule` : "") +
          (body.truncated ? `; more remain: run it again` : ""),
        ]);
        return EXIT.ok;
      }
      case "cancel": {
        const [name, routes] = queueRoutes(rest[0]);
        const { status, body } = await call("POST", routes.cancel(jobId(rest[1])));
        print(body, () => [
          status === 202
            ? `${name} ${rest[1]}: cancel requested; the run is stopping`
            : `${name} ${rest[1]}: ${body.status} (${body.error})`,
        ]);
        return EXIT.ok;
      }
      case "pause":
      case "resume": {
        const [name] = queueRoutes(rest[0]);
        const { body } = await call("POST", `/queues/${name}/${command}`);
        print(body, () => [
          body.paused ? `${name}: paused since ${body.paused_at}` : `${name}: running`,
        ]);
        return EXIT.ok;
      }
      default:
        throw new CliError(`Unknown command "${command}"\n${USAGE}`, EXIT.usage);
    }
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    io.err(`jobs: ${err.message}`);
    return err.code;
  }
}

if (import.meta.main) {
  const code = await main(Deno.args, {
    env: Deno.env.toObject(),
    out: (line) => console.log(line),
    err: (line) => console.error(line),
    confirm: Deno.stdin.isTerminal() ? (question) => confirm(question) : null,
  });
  Deno.exit(code);
}
