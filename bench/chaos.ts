/**
 * `deno task chaos [--short]`: the fault matrix. Each row runs the real worker
 * (`main.ts`, spawned) against an embedded PostgreSQL behind a TCP proxy this script controls
 * (tests/_proxy.ts), with jobs flowing, applies one fault, then SIGTERMs every worker still
 * running, and prints: jobs enqueued, completed, failed, given back, double-run (a job completed
 * twice in the logs, or more editions saved than jobs completed: a second run committed — 0
 * expected), longest wait (enqueue → finished), exit codes and the longest exit time after any
 * SIGTERM (those a scenario sends and the final one). It exits 1 when a row breaks a rule:
 * a job unaccounted for, a double run, an exit code other than the documented one, or an exit
 * slower than the shutdown budget.
 *
 * The edge rows (the enrichment provider, the outbox, the site build) count their own jobs —
 * books, auto-publish jobs, rebuilds — and, as double-run, the double effects: a book answered
 * more than once by the provider, an edition pinged more than once, a rebuild queued beyond the one
 * its repair needs. Every row also needs 0 stranded jobs (none left Pending, Queued or Running).
 *
 * Two rows stand apart: "PostgreSQL failover" builds its own PostgreSQL 15 primary and replica
 * (tests/_pg_cluster.ts; skipped without the binaries, failed under CI=true) and notes the gap
 * and the jobs lost, doubled and stranded; "split queues, holder stopped" runs two instances with
 * different `QUEUES`.
 *
 * A second table runs the host pollers (tests/_pollers.ts) against a spawned worker through a
 * slow or lossy HTTP proxy, under dash and bash, stopped as systemd stops their units: a lost
 * claim answer, SIGTERM during a claim, a step that ignores SIGTERM or takes 2 s to finish, the
 * SEO stop against a slow worker. Each row: jobs enqueued, completed, failed, given back, double
 * effects (host publishes and IndexNow pings beyond one), jobs left Running, the poller's exit
 * code and its stop time against TimeoutStopSec; a row is ok with 0 double effects, 0 stranded,
 * no step outliving the poller, exit 0 inside TimeoutStopSec, and every job accounted for.
 *
 * `--short` (CI, ≤ 3 min) runs the core faults with fewer jobs and two host rows; the full matrix
 * stays ≤ 10 min.
 *
 * The full run ends with the connection floods (idle, partial-header, slow-body) against a worker
 * held to `ulimit -n 256`: connections, closed or refused, the worker's peak fds and RSS, and
 * whether it answers after; `--only=flood` runs those alone.
 * Uses `DATABASE_URL` when set (a restart is then simulated by cutting every connection), else a
 * throwaway embedded PostgreSQL, which "server restart" restarts for real (`pg_ctl stop -m fast`,
 * then start).
 *
 * @module
 */
import { connect, type Sql } from "../lib/db.ts";
import { startEmbedded } from "../lib/embedded.ts";
import { createLogger } from "../lib/log.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import { type PgProxy, startProxy } from "../tests/_proxy.ts";
import { spawnWorker, TEST_TOKEN, type WorkerProcess } from "../tests/_worker.ts";
import { flood, type FloodKind, processUsage } from "../tests/_flood.ts";
import { freePort } from "../tests/_fs.ts";
import { type ProviderAnswer, startProvider } from "../tests/_provider.ts";
import { ENGLISH } from "../tests/_user_books.ts";
import { MISSING_ASSETS } from "../queues/ssg/mod.ts";
import { PG15_BIN, pg15Installed, startPgCluster } from "../tests/_pg_cluster.ts";
import {
  hostStage,
  lostClaimAnswer,
  seoSlowStop,
  type Shell,
  stepAtStop,
  type StopReport,
  termDuringClaim,
} from "../tests/_pollers.ts";

const SHORT = Deno.args.includes("--short");
const JOBS = SHORT ? 3 : 10;
// The faults CI runs (≤ 3 min on an idle 2-core machine); the full matrix runs every row.
const SHORT_ROWS = [
  "PostgreSQL failover",
  "split queues, holder stopped",
  "notifications dropped",
  "SIGKILL mid-job, restart",
  "server restart mid-run",
  "read-only boot",
  "provider 429 with Retry-After",
  "provider timeout",
  "lost COMMIT answer on complete",
  "rebuild with missing assets",
];
const BUDGET_MS = 3000;
const BOOK = "Chaos Book\nby Chaos\n\nCHAPTER I\n\nOne.\n\nCHAPTER II\n\nTwo.\n";

let url = Deno.env.get("DATABASE_URL");
let stopEmbedded = (): Promise<void> => Promise.resolve();
/** A real server restart (embedded only: a DATABASE_URL server is not ours to restart). */
let restartServer: (() => Promise<void>) | undefined;
if (!url) {
  const port = freePort();
  const pg = await startEmbedded({ dir: `.data/chaos-pg-${port}`, port, persistent: false });
  url = pg.url;
  stopEmbedded = pg.stop;
  restartServer = pg.restart;
}
const admin = connect(url, { schema: "public", applicationName: "chaos-admin", max: 2 });
const migrations = await readMigrations(new URL("../sql/", import.meta.url));

/** What a scenario works with. */
interface Stage {
  sql: Sql;
  schema: string;
  proxy: PgProxy;
  storage: string;
  workers: WorkerProcess[];
  /** Spawn a worker through the proxy (extra env on top of the chaos defaults). */
  spawn(env?: Record<string, string>): WorkerProcess;
  /** SIGTERM a worker and wait for its exit; the time it took counts in the row's exit time. */
  term(worker: WorkerProcess): Promise<Deno.CommandStatus>;
  /** Insert `n` jobs reading the book; returns their ids. */
  enqueue(n: number, path?: string): Promise<string[]>;
  /** A job whose source is a FIFO: its run stays in flight until `feed()`. */
  slowJob(): Promise<{ id: string; feed(): Promise<void> }>;
  /** Wait until every job is Completed or Failed (false at the deadline). */
  settled(timeoutMs?: number): Promise<boolean>;
  /** An edge row's own figures, in place of the ingestion jobs'. */
  report(figures: EdgeFigures): void;
}

/** What an edge row counts: its jobs, their outcome, double effects and stranded jobs. */
interface EdgeFigures {
  jobs: number;
  completed: number;
  failed: number;
  doubleEffects: number;
  stranded: number;
}

interface Row {
  fault: string;
  enqueued: number;
  completed: number;
  failed: number;
  givenBack: number;
  doubleRun: number;
  longestWaitS: number;
  exitCodes: string;
  exitMs: number;
  ok: boolean;
  note: string;
}

async function until(check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    // A query that fails (the server is restarting) is a "not yet".
    if (await Promise.resolve().then(check).catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

async function scenario(
  fault: string,
  body: (stage: Stage) => Promise<void>,
  expectCodes: number[] = [0],
): Promise<Row> {
  const schema = `chaos_${fault.toLowerCase().replace(/\W+/g, "_").slice(0, 20)}_${
    crypto.randomUUID().slice(0, 4)
  }`;
  const sql = connect(url!, { schema, applicationName: "chaos", max: 3 });
  await migrate(sql, schema, migrations, createLogger("silent"));
  const proxy = startProxy(url!);
  const storage = await Deno.makeTempDir({ prefix: "chaos-" });
  await Deno.writeTextFile(`${storage}/book.txt`, BOOK);
  let enqueued = 0;
  let fifos = 0;
  // Workers that exited during the scenario (a SIGKILL, a SIGTERM it sent): not part of the final
  // signal's row.
  const gone = new Set<WorkerProcess>();
  // ms from each SIGTERM to that worker's exit, the scenario's own and the final one.
  const termMs: number[] = [];
  const term = async (w: WorkerProcess): Promise<Deno.CommandStatus> => {
    const t0 = performance.now();
    try {
      w.child.kill("SIGTERM");
    } catch {
      // already exited
    }
    const status = await w.exited;
    termMs.push(performance.now() - t0);
    return status;
  };
  const stage: Stage = {
    report: () => {},
    sql,
    schema,
    proxy,
    storage,
    workers: [],
    spawn(env = {}) {
      const worker = spawnWorker(null, {
        DATABASE_URL: proxy.url,
        DATABASE_SCHEMA: schema,
        STORAGE_DIR: storage,
        DATA_DIR: storage,
        POLL_INTERVAL_MS: "2000",
        LISTENER_PROBE_MS: "1000",
        SHUTDOWN_BUDGET_MS: String(BUDGET_MS),
        STANDBY_RETRY_MS: "200",
        ...env,
      });
      stage.workers.push(worker);
      worker.exited.then(() => gone.add(worker));
      return worker;
    },
    term,
    async enqueue(n, path = "book.txt") {
      enqueued += n;
      const rows = await sql<{ id: string }[]>`
        insert into ingestion_jobs (source_path) select ${path} from generate_series(1, ${n})
        returning id`;
      return rows.map((r) => r.id);
    },
    async slowJob() {
      const name = `slow-${++fifos}.txt`;
      const fifo = `${storage}/${name}`;
      const made = await new Deno.Command("mkfifo", { args: [fifo] }).output();
      if (!made.success) throw new Error(`Cannot mkfifo "${fifo}"`);
      const [id] = await stage.enqueue(1, name);
      return {
        id,
        async feed() {
          // Replace the FIFO by the book for later readers, and send the book through the pipe
          // to a reader already waiting on it (a run that re-claimed the job): closing the pipe
          // without writing, as before, handed that run an empty file, failing the job for good
          // although the worker had done everything right. Opening read-write never blocks, and
          // the book fits in the pipe's buffer.
          const writer = await Deno.open(fifo, { read: true, write: true });
          await Deno.remove(fifo);
          await Deno.writeTextFile(fifo, BOOK);
          const bytes = new TextEncoder().encode(BOOK);
          for (let at = 0; at < bytes.length;) at += await writer.write(bytes.subarray(at));
          writer.close();
        },
      };
    },
    async settled(timeoutMs = 60_000) {
      return await until(async () => {
        const [{ open }] = await sql<{ open: number }[]>`
          select count(*)::int as open from ingestion_jobs
          where status not in ('Completed', 'Failed')`;
        return open === 0;
      }, timeoutMs);
    },
  };
  let note = "";
  let edge: EdgeFigures | undefined;
  stage.report = (figures) => (edge = figures);
  try {
    await body(stage);
    if (!(await stage.settled(SHORT ? 90_000 : 180_000))) {
      note = "jobs left unsettled at the deadline";
    }
  } catch (err) {
    note = `scenario error: ${(err as Error).message}`.slice(0, 100);
    console.error(`  [${fault}] ${(err as Error).message.slice(0, 2000)}`);
  }
  // The final signal: every worker still running gets SIGTERM; time each exit.
  await Promise.all(stage.workers.filter((w) => !gone.has(w)).map(term));
  const [stats] = await sql<
    { completed: number; failed: number; wait_s: number | null; editions: number }[]
  >`
    select count(*) filter (where status = 'Completed')::int as completed,
           count(*) filter (where status = 'Failed')::int as failed,
           max(extract(epoch from finished_at - created_at))::float8 as wait_s,
           (select count(*)::int from editions) as editions
    from ingestion_jobs`;
  const logs: Array<Record<string, unknown>> = stage.workers.flatMap((w) => w.logs);
  const givenBack =
    logs.filter((l) =>
      l.msg === "job given back" || l.msg === "orphan given back (lock lost mid-run)"
    ).length;
  const completions = new Map<string, number>();
  for (const l of logs) {
    if (l.msg === "job completed") {
      completions.set(String(l.id), (completions.get(String(l.id)) ?? 0) + 1);
    }
  }
  // A job completed twice in the logs, or work committed twice: every completed job saved
  // exactly one edition, so more editions than completed jobs means a second run committed.
  const doubleRun = [...completions.values()].filter((n) => n > 1).length +
    Math.max(0, stats.editions - stats.completed);
  // Every worker's exit, in spawn order: those that exited during the scenario too (a SIGKILL
  // shows as "kill"); the exit time is the final signal's.
  const statuses = await Promise.all(stage.workers.map((w) => w.exited));
  const codes = statuses.map((st) => st.signal === "SIGKILL" ? "kill" : st.code);
  const exitMs = Math.round(Math.max(0, ...termMs));
  const accounted = stats.completed + stats.failed === enqueued;
  if (Deno.args.includes("--verbose") || !accounted || doubleRun > 0) {
    for (const [i, w] of stage.workers.entries()) {
      for (const l of w.logs.slice(-40)) {
        console.error(
          `  [${fault} w${i}] ${l.msg} ${
            JSON.stringify({
              ...l,
              msg: undefined,
              time: undefined,
              level: undefined,
              pid: undefined,
              hostname: undefined,
            })
          }`,
        );
      }
    }
    const rows =
      await sql`select id, status, attempt_count, error from ingestion_jobs where status not in ('Completed')`;
    console.error(`  [${fault}] unsettled: ${JSON.stringify(rows)}`);
  }
  if (edge && edge.stranded > 0) note ||= `${edge.stranded} stranded`;
  // An edge row's rules are its own figures (its editions are not ingestion's).
  const counted = edge
    ? edge.doubleEffects === 0 && edge.stranded === 0 && edge.completed > 0
    : accounted && doubleRun === 0;
  const ok = counted && exitMs <= BUDGET_MS + 1000 &&
    codes.every((c) => c === "kill" || expectCodes.includes(c)) && !note;
  await proxy.close();
  await sql`drop schema ${sql(schema)} cascade`.catch(() => {});
  await sql.end({ timeout: 1 });
  await Deno.remove(storage, { recursive: true }).catch(() => {});
  return {
    fault,
    enqueued: edge?.jobs ?? enqueued,
    completed: edge?.completed ?? stats.completed,
    failed: edge?.failed ?? stats.failed,
    givenBack,
    doubleRun: edge?.doubleEffects ?? doubleRun,
    longestWaitS: Math.round((stats.wait_s ?? 0) * 10) / 10,
    exitCodes: codes.join(","),
    exitMs,
    ok,
    note,
  };
}

const listening = (w: WorkerProcess) => w.waitForLog("consumer started", {}, 60_000);

type Scenario = [string, (s: Stage) => Promise<void>, number[]?];
const SCENARIOS: Scenario[] = [
  ["listener black-holed", async (s) => {
    const w = s.spawn();
    await listening(w);
    s.proxy.blackhole(/-listener$/);
    await s.enqueue(JOBS);
    await w.waitForLog(
      "listener probe missed: notifications are not delivered; reconnecting the listener",
      {},
      20_000,
    );
  }],
  ["notifications dropped", async (s) => {
    s.proxy.dropNotifications(/-listener$/);
    const w = s.spawn();
    await listening(w);
    await s.enqueue(JOBS);
  }],
  ["everything cut 2 s mid-run", async (s) => {
    const w = s.spawn();
    await listening(w);
    const slow = await s.slowJob();
    await w.waitForLog("job claimed", { id: slow.id }, 30_000);
    await s.enqueue(JOBS);
    s.proxy.cut();
    await new Promise((r) => setTimeout(r, 2000));
    s.proxy.restore();
    await w.waitForLog("consumer started", {}, 30_000);
    await slow.feed();
  }],
  ["SIGTERM mid-job, restart", async (s) => {
    const w = s.spawn();
    await listening(w);
    const slow = await s.slowJob();
    await s.enqueue(JOBS);
    await w.waitForLog("job claimed", { id: slow.id }, 30_000);
    await s.term(w);
    const next = s.spawn();
    await listening(next);
    await slow.feed();
  }],
  ["SIGKILL mid-job, restart", async (s) => {
    const w = s.spawn();
    await listening(w);
    const slow = await s.slowJob();
    await s.enqueue(JOBS);
    await w.waitForLog("job claimed", { id: slow.id }, 30_000);
    w.child.kill("SIGKILL");
    await w.exited;
    const next = s.spawn();
    await next.waitForLog("orphan recovered (its consumer is gone)", { id: slow.id }, 30_000);
    await slow.feed();
  }],
  ["server restart mid-run", async (s) => {
    const w = s.spawn();
    await listening(w);
    const slow = await s.slowJob();
    await w.waitForLog("job claimed", { id: slow.id }, 30_000);
    await s.enqueue(JOBS);
    if (restartServer) {
      // A real restart: `pg_ctl stop -m fast` ends every session, the port refuses until the
      // server is back.
      await restartServer();
    } else {
      // Not our server to restart: every session of the worker ends (as in a restart) and the
      // port refuses for 2 s.
      s.proxy.cut();
      await admin`
        select pg_terminate_backend(pid) from pg_stat_activity
        where application_name like 'textstack%'`.catch(() => {});
      await new Promise((r) => setTimeout(r, 2000));
      s.proxy.restore();
    }
    // Given back by the run's own give-back (retried until the database is back) or, if that
    // gave up, by the recovery when the lock is taken again: whichever comes first.
    const givenBack = (l: Record<string, unknown>) =>
      l.id === slow.id &&
      (l.msg === "job given back" || l.msg === "orphan given back (lock lost mid-run)");
    if (!(await until(() => w.logs.some(givenBack), 30_000))) {
      throw new Error(`job ${slow.id} was not given back after the restart`);
    }
    await slow.feed();
  }],
  ["two overlapping instances", async (s) => {
    const a = s.spawn();
    await listening(a);
    const b = s.spawn();
    await b.waitForLog("another consumer holds the queue; standing by", {}, 30_000);
    const slow = await s.slowJob();
    await s.enqueue(JOBS);
    await a.waitForLog("job claimed", { id: slow.id }, 30_000);
    await s.term(a);
    await listening(b);
    await slow.feed();
  }],
  ["read-only boot", async (s) => {
    const role = `chaos_ro_${crypto.randomUUID().slice(0, 6)}`;
    await admin`create role ${admin(role)} login password 'pw'`;
    await admin`grant all on schema ${admin(s.schema)} to ${admin(role)}`;
    await admin`grant all on all tables in schema ${admin(s.schema)} to ${admin(role)}`;
    await admin`alter role ${admin(role)} set default_transaction_read_only = on`;
    const roUrl = new URL(s.proxy.url);
    roUrl.username = role;
    roUrl.password = "pw";
    await s.enqueue(JOBS);
    const w = s.spawn({ DATABASE_URL: roUrl.toString() });
    await w.waitForLog("orphan recovery failed; retrying", { code: "25006" }, 30_000);
    await admin`alter role ${admin(role)} reset default_transaction_read_only`;
    await s.settled();
    await s.term(w);
    await admin`drop owned by ${admin(role)}`;
    await admin`drop role ${admin(role)}`;
  }],
];
// Queues spread over two instances (QUEUES): A consumes ingestion only, B everything (a standby
// for ingestion); A is stopped mid-run and B takes ingestion over.
SCENARIOS.push(["split queues, holder stopped", async (s) => {
  const a = s.spawn({ QUEUES: "ingestion" });
  await listening(a);
  const b = s.spawn({ QUEUES: "ssg,user_ingestion,enrichment,ingestion" });
  await b.waitForLog(
    "another consumer holds the queue; standing by",
    { queue: "ingestion" },
    30_000,
  );
  for (const queue of ["ssg", "user_ingestion", "enrichment"]) {
    await b.waitForLog("consumer started", { queue }, 30_000);
  }
  if (a.logs.some((l) => l.msg === "consumer started" && l.queue !== "ingestion")) {
    throw new Error("A consumed a queue QUEUES does not list");
  }
  const slow = await s.slowJob();
  await s.enqueue(JOBS);
  await a.waitForLog("job claimed", { id: slow.id }, 30_000);
  await s.term(a);
  await b.waitForLog("consumer started", { queue: "ingestion" }, 30_000);
  await slow.feed();
}]);
if (!SHORT) {
  SCENARIOS.push(
    ["lock session black-holed", async (s) => {
      const w = s.spawn();
      await listening(w);
      await s.enqueue(JOBS);
      s.proxy.blackhole(/-lock-ingestion$/);
      await w.waitForLog("queue lock lost", {}, 30_000);
      await s.enqueue(JOBS);
    }],
    ["pool black-holed, SIGTERM mid-job", async (s) => {
      const w = s.spawn();
      await listening(w);
      const slow = await s.slowJob();
      await w.waitForLog("job claimed", { id: slow.id }, 30_000);
      s.proxy.blackhole(/^textstack$/);
      await s.term(w);
      s.proxy.restore();
      const next = s.spawn();
      await listening(next);
      await s.enqueue(JOBS);
      await slow.feed();
    }, [0, 3]],
  );
}

/** One connection flood against a worker held to an open-file limit of 256. */
interface FloodRow {
  flood: string;
  connections: number;
  closedOrRefused: number;
  lastCloseMs: number;
  peakFds: number;
  peakRssMiB: number;
  answersAfter: boolean;
  ok: boolean;
}

const FLOOD_OPEN_FILES = 256;
const FLOOD_TIMEOUT_MS = 2000;

/**
 * The flood rows: one worker under `ulimit -n 256` (so its connection cap is 96) with 2 s header
 * and idle timeouts; per kind, two clients of 500 connections at once, held 4 s, the worker's
 * descriptors and RSS sampled meanwhile. A row is ok when the worker stays under its open-file
 * limit, closes every header-less connection within the timeout (plus 1 s), keeps every slow
 * body it accepted, and answers /healthz after.
 */
async function floodRows(): Promise<FloodRow[]> {
  const schema = `chaos_flood_${crypto.randomUUID().slice(0, 4)}`;
  const sql = connect(url!, { schema, applicationName: "chaos", max: 2 });
  await migrate(sql, schema, migrations, createLogger("silent"));
  const dir = await Deno.makeTempDir({ prefix: "chaos-flood-" });
  const worker = spawnWorker(
    null,
    {
      DATABASE_URL: url!,
      DATABASE_SCHEMA: schema,
      STORAGE_DIR: `${dir}/storage`,
      DATA_DIR: dir,
      SITE_DIR: `${dir}/site`,
      HTTP_HEADERS_TIMEOUT_MS: String(FLOOD_TIMEOUT_MS),
      HTTP_IDLE_TIMEOUT_MS: String(FLOOD_TIMEOUT_MS),
    },
    [],
    undefined,
    { openFiles: FLOOD_OPEN_FILES },
  );
  const out: FloodRow[] = [];
  try {
    const port = Number(new URL(await worker.baseUrl()).port);
    for (const kind of ["idle", "partial", "slowbody"] as FloodKind[]) {
      let peakFds = 0;
      let peakRssMiB = 0;
      const sample = async () => {
        for (let i = 0; i < 12; i++) {
          await new Promise((r) => setTimeout(r, 300));
          try {
            const usage = processUsage(worker.child.pid);
            peakFds = Math.max(peakFds, usage.fds);
            peakRssMiB = Math.max(peakRssMiB, usage.rssMiB);
          } catch {
            // the worker is gone: the row says so below
          }
        }
      };
      const results = await Promise.all([
        flood(port, kind, 500, 4000, TEST_TOKEN, sample),
        flood(port, kind, 500, 4000, TEST_TOKEN),
      ]);
      const connections = results.reduce((n, r) => n + r.opened + r.refused, 0);
      const closedOrRefused = results.reduce((n, r) => n + r.refused + r.closedByServer, 0);
      const lastCloseMs = Math.max(...results.map((r) => r.lastCloseMs));
      // The accept watchdog proves the listener every 2 s: give it one round.
      let answersAfter = false;
      for (let i = 0; i < 20 && !answersAfter; i++) {
        answersAfter = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => (r.body?.cancel(), r.ok),
          () => false,
        );
        if (!answersAfter) await new Promise((r) => setTimeout(r, 250));
      }
      const closedInTime = kind === "slowbody"
        ? true
        : closedOrRefused === connections && lastCloseMs <= FLOOD_TIMEOUT_MS + 1000;
      out.push({
        flood: `${kind} × 1000 (ulimit -n ${FLOOD_OPEN_FILES})`,
        connections,
        closedOrRefused,
        lastCloseMs,
        peakFds,
        peakRssMiB,
        answersAfter,
        ok: answersAfter && peakFds < FLOOD_OPEN_FILES && closedInTime,
      });
    }
  } finally {
    worker.child.kill("SIGTERM");
    await worker.exited;
    await sql`drop schema ${sql(schema)} cascade`.catch(() => {});
    await sql.end({ timeout: 1 });
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  return out;
}

// --- The edge rows ---

const api = async (w: WorkerProcess, method: string, path: string, body?: unknown) =>
  await fetch(`${await w.baseUrl()}/internal${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TEST_TOKEN}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const ANSWER_JSON = JSON.stringify({
  summary: "A chaos book.",
  genres: ["test"],
  audience: "adult",
  content_warnings: [],
});

// Books enriched through a misbehaving provider: each book's first request misbehaves, the next
// answers. Double effect: a book answered with content more than once.
async function providerRow(s: Stage, misbehave: ProviderAnswer, env: Record<string, string>) {
  const ok: ProviderAnswer = { kind: "content", content: ANSWER_JSON };
  const seen = new Map<string, number>();
  // The script runs from its start again for each book (its requests are cleared between).
  const provider = startProvider([misbehave, ok]);
  try {
    const books: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const [book] = await s.sql<{ id: string }[]>`
        insert into user_books (owner_id, title, format, status)
        values (7, ${`Chaos ${i}`}, 'text', 'Ready') returning id`;
      await s.sql`
        insert into user_chapters (user_book_id, position, title, html)
        values (${book.id}, 1, 'One', ${ENGLISH})`;
      books.push(book.id);
    }
    const w = s.spawn({ ENRICHMENT_API_URL: provider.url, ENRICHMENT_MODEL: "m", ...env });
    await listening(w);
    // One book at a time through the one server: Pending, then wait for it to settle.
    for (const id of books) {
      await s.sql`update user_books set metadata_enrichment_status = 'Pending' where id = ${id}`;
      await until(async () => {
        const [row] = await s.sql<{ status: string }[]>`
          select metadata_enrichment_status as status from user_books where id = ${id}`;
        return row.status === "Completed" || row.status === "Failed";
      }, 60_000);
      const answered = provider.requests.filter((r) => r.key?.startsWith(`book-${id}-`)).length;
      seen.set(id, answered);
      // The next book's first request misbehaves again.
      provider.requests.length = 0;
    }
    const [st] = await s.sql<{ completed: number; failed: number; stranded: number }[]>`
      select count(*) filter (where metadata_enrichment_status = 'Completed')::int as completed,
             count(*) filter (where metadata_enrichment_status = 'Failed')::int as failed,
             count(*) filter (where metadata_enrichment_status in ('Pending', 'Running'))::int
               as stranded
      from user_books`;
    // Each book: one misbehaving request, one answer; more answers than that is a double effect.
    const doubleEffects = [...seen.values()].filter((n) => n > 2).length;
    s.report({ jobs: books.length, ...st, doubleEffects });
  } finally {
    await provider.close();
  }
}

function indexNowEndpoint() {
  const urls: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    urls.push(...(await req.json()).urlList);
    return new Response(null, { status: 202 });
  });
  return { urls, url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/indexnow`, server };
}

SCENARIOS.push(
  ["provider 429 with Retry-After", (s) =>
    providerRow(s, {
      kind: "status",
      status: 429,
      headers: { "retry-after": "1" },
      message: "rate limited",
    }, {})],
  [
    "provider timeout",
    (s) => providerRow(s, { kind: "hold" }, { ENRICHMENT_API_TIMEOUT_MS: "500" }),
  ],
  ["lost COMMIT answer on complete", async (s) => {
    const endpoint = indexNowEndpoint();
    try {
      const w = s.spawn({
        INDEXNOW_URL: endpoint.url,
        INDEXNOW_KEY: "chaos-key-0123",
        SITE_URL: "https://books.example",
        AUTO_PUBLISH_ON_INGEST: "false",
      });
      await listening(w);
      const editions: string[] = [];
      for (let i = 0; i < JOBS; i++) {
        const [e] = await s.sql<{ id: string }[]>`
          insert into editions (title, format) values (${`Chaos ${i}`}, 'txt') returning id`;
        editions.push(e.id);
        await s.sql`insert into auto_publish_jobs (edition_id) values (${e.id})`;
      }
      for (const [i, edition] of editions.entries()) {
        // The pool may still be reconnecting after the last cut: claim until it answers 200.
        let jobs: { id: string; claim_token: string }[] = [];
        await until(async () => {
          const res = await api(w, "POST", "/auto-publish/jobs/claim");
          if (res.status === 200) jobs = (await res.json()).jobs;
          else await res.body?.cancel();
          return res.status === 200;
        }, 30_000);
        const job = jobs[0];
        if (!job) {
          const state = await s.sql`select id, edition_id, status, error from auto_publish_jobs`;
          throw new Error(`nothing to claim for edition ${edition}: ${JSON.stringify(state)}`);
        }
        const complete = () =>
          api(w, "POST", `/auto-publish/jobs/${job.id}/complete`, {
            claim_token: job.claim_token,
          });
        if (i % 2 === 1) {
          assert200(await complete(), `complete of edition ${edition}`);
          continue;
        }
        // Every other complete: its COMMIT happens, its answer is lost, then the poller retries.
        s.proxy.muteAfterCommit(/^textstack$/);
        const lost = complete().catch((err) => err);
        await until(
          async () =>
            (await s.sql`select status from auto_publish_jobs where id = ${job.id}`)[0].status ===
              "Completed",
          20_000,
        );
        // The ping goes out meanwhile (the drain's own connections); the cut waits for its
        // delivered mark: a cut between the endpoint's answer and that mark would ping again
        // (at least once, docs/outbox.md), which is not this row's fault.
        await until(
          async () =>
            (await s.sql`
            select 1 from outbox
            where payload->>'edition_id' = ${edition} and delivered_at is not null`).length === 1,
          20_000,
        );
        // The connection whose answer was lost dies, as a dead socket's does.
        s.proxy.closeMuted();
        await lost;
        let retried: Response | undefined;
        await until(async () => (retried = await complete()).status === 200, 30_000);
        assert200(retried!, `retried complete of edition ${edition}`);
      }
      await until(() => new Set(endpoint.urls).size === editions.length, 30_000);
      // A drain round or two more, to see a second ping if there were one.
      await new Promise((r) => setTimeout(r, 2500));
      const [st] = await s.sql<{ completed: number; failed: number; stranded: number }[]>`
        select count(*) filter (where status = 'Completed')::int as completed,
               count(*) filter (where status = 'Failed')::int as failed,
               count(*) filter (where status in ('Queued', 'Running'))::int as stranded
        from auto_publish_jobs`;
      const missed = editions.length - new Set(endpoint.urls).size;
      s.report({
        jobs: editions.length,
        ...st,
        // A second ping of an edition, or a publish never pinged.
        doubleEffects: endpoint.urls.length - new Set(endpoint.urls).size + missed,
        stranded: st.stranded,
      });
    } finally {
      await endpoint.server.shutdown();
    }
  }],
  ["rebuild with missing assets", async (s) => {
    const root = await Deno.makeTempDir({ prefix: "chaos-site-" });
    // The live site is a symlink the first build creates (site/builds.ts).
    const site = `${root}/site`;
    try {
      const editions: string[] = [];
      for (let i = 0; i < JOBS; i++) {
        // Published, asset version 1 saved and never written (its repair held off for now); its
        // image only in the database.
        const [e] = await s.sql<{ id: string }[]>`
          insert into editions (title, format, asset_version, assets_version, published_at,
                                assets_repair_after)
          values (${`Chaos ${i}`}, 'txt', 1, 0, now(), now() + interval '1 hour') returning id`;
        await s.sql`
          insert into chapters (edition_id, position, title, html)
          values (${e.id}, 1, 'One', '<p><img src="res/a.png" alt=""></p>')`;
        await s.sql`
          insert into resources (edition_id, path, media_type, bytes)
          values (${e.id}, 'res/a.png', 'image/png', ${PNG})`;
        editions.push(e.id);
      }
      const w = s.spawn({ SITE_DIR: site });
      await listening(w);
      await s.sql`insert into ssg_rebuild_jobs (kind) values ('Full')`;
      await until(
        async () =>
          (await s.sql`select count(*)::int as n from ssg_rebuild_jobs where status = 'Failed'`)[0]
            .n === 1,
        30_000,
      );
      const [failed] = await s.sql<{ error: string }[]>`
        select error from ssg_rebuild_jobs where status = 'Failed'`;
      if (!failed.error.startsWith(MISSING_ASSETS)) throw new Error(`failed: ${failed.error}`);
      // Now the ingestion's repair (its poll tick) writes the assets and queues the rebuild.
      await s.sql`update editions set assets_repair_after = null`;
      await until(
        async () =>
          (await s.sql`select count(*)::int as n from ssg_rebuild_jobs where status = 'Completed'`)[
            0
          ]
            .n === 1,
        60_000,
      );
      // More poll ticks: a failed rebuild or a repair must not queue another.
      await new Promise((r) => setTimeout(r, 4500));
      const [st] = await s.sql<
        { n: number; completed: number; failed: number; stranded: number }[]
      >`
        select count(*)::int as n,
               count(*) filter (where status = 'Completed')::int as completed,
               count(*) filter (where status = 'Failed')::int as failed,
               count(*) filter (where status in ('Queued', 'Running'))::int as stranded
        from ssg_rebuild_jobs`;
      const live = await Deno.readTextFile(`${site}/editions/${editions[0]}/1.html`);
      if (!live.includes('src="res/a.png"')) throw new Error("the live page has no image");
      s.report({
        jobs: st.n,
        completed: st.completed,
        failed: st.failed,
        // Two rebuilds: the refused one and the repair's; any more is a rebuild queued again.
        doubleEffects: Math.max(0, st.n - 2),
        stranded: st.stranded,
      });
    } finally {
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  }],
);

// A real 1×1 PNG: the render checks an image's bytes.
const PNG = Uint8Array.from(
  atob(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  ),
  (c) => c.charCodeAt(0),
);

function assert200(res: Response, what: string): void {
  if (res.status !== 200) throw new Error(`${what}: ${res.status}`);
}

/**
 * A PostgreSQL failover (tests/_pg_cluster.ts): a PG 15 primary and a synchronous replica, the
 * worker given both as a host list with target_session_attrs=read-write, books streaming in; the
 * primary stopped with `-m immediate`, the replica promoted 1 s later. The gap is the time from
 * the stop until `/readyz` answers 200 again; lost = neither Completed nor Failed at the end,
 * doubled = completed twice (logs) or more editions than completions, stranded = left Processing.
 */
async function failoverRow(): Promise<Row> {
  const fault = "PostgreSQL failover";
  const row: Row = {
    fault,
    enqueued: 0,
    completed: 0,
    failed: 0,
    givenBack: 0,
    doubleRun: 0,
    longestWaitS: 0,
    exitCodes: "",
    exitMs: 0,
    ok: false,
    note: "",
  };
  if (!pg15Installed()) {
    const why = `PostgreSQL 15 binaries missing (${PG15_BIN}): apt-get install postgresql-15`;
    if (Deno.env.get("CI") === "true") return { ...row, note: why };
    return { ...row, ok: true, note: `skipped: ${why}` };
  }
  const books = SHORT ? 20 : 40;
  const cluster = await startPgCluster();
  const storage = await Deno.makeTempDir({ prefix: "chaos-failover-" });
  await Deno.writeTextFile(`${storage}/book.txt`, BOOK);
  const worker = spawnWorker(null, {
    DATABASE_URL: cluster.hostList("read-write"),
    DATABASE_SCHEMA: "chaos_failover",
    STORAGE_DIR: storage,
    DATA_DIR: storage,
    SITE_DIR: `${storage}/site`,
    POLL_INTERVAL_MS: "60000",
    LISTENER_PROBE_MS: "60000",
    SHUTDOWN_BUDGET_MS: String(BUDGET_MS),
    STANDBY_RETRY_MS: "200",
  });
  const sql = connect(cluster.hostList("primary"), {
    schema: "chaos_failover",
    applicationName: "chaos",
    max: 2,
  });
  try {
    const base = `http://127.0.0.1:${(await worker.waitForLog("http listening", {}, 60_000)).port}`;
    await listening(worker);
    const readyNow = async () =>
      (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(3000) }).then(
        async (r) => (await r.body?.cancel(), r.status),
        () => 0,
      )) === 200;
    if (!(await until(readyNow, 30_000))) throw new Error("not ready before the failover");
    const enqueue = () => sql`insert into ingestion_jobs (source_path) values ('book.txt')`;
    for (let n = 0; n < books / 2; n++) {
      await enqueue();
      await new Promise((r) => setTimeout(r, 50));
    }
    const crashAt = performance.now();
    await cluster.crashPrimary();
    const streaming = (async () => {
      for (let n = books / 2; n < books; n++) {
        await enqueue();
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await new Promise((r) => setTimeout(r, 1000));
    await cluster.promoteReplica();
    let readyAt = 0;
    await until(async () => (await readyNow()) && (readyAt = performance.now()) > 0, 30_000);
    await streaming;
    row.enqueued = books;
    await until(async () => {
      const [{ open }] = await sql<{ open: number }[]>`
        select count(*)::int as open from ingestion_jobs where status not in ('Completed', 'Failed')`;
      return open === 0;
    }, 60_000);
    const t = performance.now();
    worker.child.kill("SIGTERM");
    const status = await worker.exited;
    row.exitMs = Math.round(performance.now() - t);
    row.exitCodes = String(status.code);
    const [stats] = await sql<
      {
        completed: number;
        failed: number;
        processing: number;
        editions: number;
        wait_s: number | null;
      }[]
    >`
      select count(*) filter (where status = 'Completed')::int as completed,
             count(*) filter (where status = 'Failed')::int as failed,
             count(*) filter (where status = 'Processing')::int as processing,
             (select count(*)::int from editions) as editions,
             max(extract(epoch from finished_at - created_at))::float8 as wait_s
      from ingestion_jobs`;
    const completions = new Map<string, number>();
    for (const l of worker.logs) {
      if (l.msg === "job completed") {
        completions.set(String(l.id), (completions.get(String(l.id)) ?? 0) + 1);
      }
    }
    row.completed = stats.completed;
    row.failed = stats.failed;
    row.givenBack = worker.logs.filter((l) =>
      l.msg === "job given back" || l.msg === "orphan given back (lock lost mid-run)"
    ).length;
    row.doubleRun = [...completions.values()].filter((n) =>
      n > 1
    ).length +
      Math.max(0, stats.editions - stats.completed);
    row.longestWaitS = Math.round((stats.wait_s ?? 0) * 10) / 10;
    const lost = books - stats.completed - stats.failed;
    const gapS = readyAt ? (readyAt - crashAt) / 1000 : NaN;
    row.note = `gap ${
      gapS.toFixed(2)
    } s (stop -> /readyz 200), lost ${lost}, doubled ${row.doubleRun}, stranded ${stats.processing}`;
    row.ok = readyAt > 0 && lost === 0 && row.doubleRun === 0 && stats.processing === 0 &&
      status.code === 0 && row.exitMs <= BUDGET_MS + 1000;
  } catch (err) {
    row.note = `scenario error: ${(err as Error).message}`.slice(0, 100);
  } finally {
    try {
      worker.child.kill("SIGKILL");
    } catch { /* exited */ }
    await worker.exited;
    await sql.end({ timeout: 1 }).catch(() => {});
    await cluster.destroy();
    await Deno.remove(storage, { recursive: true }).catch(() => {});
  }
  return row;
}

const t0 = performance.now();
const rows: Row[] = [];
const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7);
if (!only || "PostgreSQL failover".includes(only)) {
  const row = await failoverRow();
  rows.push(row);
  console.error(`${row.ok ? "ok  " : "FAIL"} ${row.fault} ${row.note}`);
}
for (const [fault, body, codes] of SCENARIOS) {
  if (only && !fault.includes(only)) continue;
  if (SHORT && !SHORT_ROWS.includes(fault)) continue;
  const row = await scenario(fault, body, codes);
  rows.push(row);
  console.error(`${row.ok ? "ok  " : "FAIL"} ${fault} ${row.note}`);
}
const header =
  "| fault | enqueued | completed | failed | given back | double-run | longest wait (s) | exit codes | exit time (ms) | ok |";
console.log(header);
console.log("|" + " --- |".repeat(10));
for (const r of rows) {
  console.log(
    `| ${r.fault} | ${r.enqueued} | ${r.completed} | ${r.failed} | ${r.givenBack} | ${r.doubleRun} | ${r.longestWaitS} | ${r.exitCodes} | ${r.exitMs} | ${
      r.ok ? "yes" : `NO ${r.note}`
    } |`,
  );
}
// The host pollers' rows: one worker on its own schema for all of them.
type HostRow = [
  string,
  Shell,
  (stage: Awaited<ReturnType<typeof hostStage>>, shell: Shell) => Promise<StopReport>,
];
const HOST_ROWS: HostRow[] = [
  ["lost claim answer (auto-publish)", "dash", (st, sh) => lostClaimAnswer(st, sh, "auto-publish")],
  ["step finishing 2 s after SIGTERM", "dash", (st, sh) => stepAtStop(st, sh, "finishes")],
];
if (!SHORT) {
  HOST_ROWS.push(
    ["lost claim answer (seo)", "dash", (st, sh) => lostClaimAnswer(st, sh, "seo")],
    [
      "SIGTERM during a claim (auto-publish)",
      "dash",
      (st, sh) => termDuringClaim(st, sh, "auto-publish"),
    ],
    ["SIGTERM during a claim (seo)", "bash", (st, sh) => termDuringClaim(st, sh, "seo")],
    ["step finishing 2 s after SIGTERM", "bash", (st, sh) => stepAtStop(st, sh, "finishes")],
    ["step ignoring SIGTERM", "dash", (st, sh) => stepAtStop(st, sh, "ignores")],
    ["step ignoring SIGTERM", "bash", (st, sh) => stepAtStop(st, sh, "ignores")],
    ["SEO stop, slow worker", "dash", seoSlowStop],
    ["SEO stop, slow worker", "bash", seoSlowStop],
  );
}
const hostRows: Array<StopReport & { ok: boolean }> = [];
const hostPicked = HOST_ROWS.filter(([fault]) => !only || fault.includes(only));
if (hostPicked.length > 0) {
  const schema = `chaos_host_${crypto.randomUUID().slice(0, 6)}`;
  const sql = connect(url!, { schema, applicationName: "chaos", max: 3 });
  await migrate(sql, schema, migrations, createLogger("silent"));
  const dirs = await Deno.makeTempDir({ prefix: "chaos-host-" });
  const stage = await hostStage(sql, (env) =>
    spawnWorker(null, {
      DATABASE_URL: url!,
      DATABASE_SCHEMA: schema,
      STORAGE_DIR: `${dirs}/storage`,
      DATA_DIR: `${dirs}/data`,
      SITE_DIR: `${dirs}/site`,
      ...env,
    }));
  try {
    for (const [fault, shell, run] of hostPicked) {
      const r = await run(stage, shell);
      const ok = r.doubleEffects === 0 && r.running === 0 && !r.stepOutlived && r.exitCode === 0 &&
        r.stopMs < r.timeoutStopS * 1000 && r.completed + r.failed + r.queued === r.enqueued;
      hostRows.push({ ...r, scenario: fault, ok });
      console.error(`${ok ? "ok  " : "FAIL"} ${fault} (${shell})`);
      if (!ok || Deno.args.includes("--verbose")) {
        for (const l of r.lines.slice(-30)) console.error(`  [${fault} ${shell}] ${l}`);
      }
    }
  } finally {
    await stage.close();
    await sql`drop schema ${sql(schema)} cascade`.catch(() => {});
    await sql.end({ timeout: 1 });
    await Deno.remove(dirs, { recursive: true }).catch(() => {});
  }
  console.log("");
  console.log(
    "| host fault | shell | enqueued | completed | failed | given back | double effects (publishes, pings) | left Running | poller exit | stop (ms) / TimeoutStopSec | ok |",
  );
  console.log("|" + " --- |".repeat(11));
  for (const r of hostRows) {
    const over = (m: Record<string, number>) =>
      Object.values(m).reduce((s, n) => s + Math.max(0, n - 1), 0);
    console.log(
      `| ${r.scenario} | ${r.shell} | ${r.enqueued} | ${r.completed} | ${r.failed} | ${r.givenBack} | ${r.doubleEffects} (${
        over(r.effects)
      }, ${over(r.pings)}) | ${r.running} | ${r.exitSignal ?? r.exitCode} | ${r.stopMs} / ${
        r.timeoutStopS * 1000
      } | ${r.ok ? "yes" : "NO"} |`,
    );
  }
}
// The floods: not in --short.
const floods = SHORT || (only && !"flood".includes(only)) ? [] : await floodRows();
if (floods.length > 0) {
  console.log(
    "\n| flood | connections | closed or refused | last close (ms) | peak fds | peak RSS (MiB) | answers after | ok |",
  );
  console.log("|" + " --- |".repeat(8));
  for (const f of floods) {
    console.log(
      `| ${f.flood} | ${f.connections} | ${f.closedOrRefused} | ${f.lastCloseMs} | ${f.peakFds} | ${f.peakRssMiB} | ${
        f.answersAfter ? "yes" : "NO"
      } | ${f.ok ? "yes" : "NO"} |`,
    );
  }
}
console.log(
  `chaos: ${rows.filter((r) => r.ok).length}/${rows.length} rows ok, host pollers ${
    hostRows.filter((r) => r.ok).length
  }/${hostRows.length}, floods ${floods.filter((f) => f.ok).length}/${floods.length}, in ${
    Math.round((performance.now() - t0) / 1000)
  } s`,
);
await admin.end({ timeout: 1 });
await stopEmbedded();
Deno.exit(
  rows.every((r) => r.ok) && hostRows.every((r) => r.ok) && floods.every((f) => f.ok) ? 0 : 1,
);
