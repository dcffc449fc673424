/**
 * `deno task chaos [--short]`: the fault matrix of issue 9. Each row runs the real worker
 * (`main.ts`, spawned) against an embedded PostgreSQL behind a TCP proxy this script controls
 * (tests/_proxy.ts), with jobs flowing, applies one fault, then SIGTERMs every worker still
 * running, and prints: jobs enqueued, completed, failed, given back, double-run (a job completed
 * twice in the logs, or more editions saved than jobs completed: a second run committed — 0
 * expected), longest wait (enqueue → finished), exit codes and the longest exit time after any
 * SIGTERM (those a scenario sends and the final one). It exits 1 when a row breaks a rule:
 * a job unaccounted for, a double run, an exit code other than the documented one, or an exit
 * slower than the shutdown budget.
 *
 * `--short` (CI, ≤ 3 min) runs the core faults with fewer jobs; the full matrix stays ≤ 10 min.
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

const SHORT = Deno.args.includes("--short");
const JOBS = SHORT ? 3 : 10;
// The faults CI runs (≤ 3 min on an idle 2-core machine); the full matrix runs every row.
const SHORT_ROWS = [
  "notifications dropped",
  "SIGKILL mid-job, restart",
  "server restart mid-run",
  "read-only boot",
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
  const ok = accounted && doubleRun === 0 && exitMs <= BUDGET_MS + 1000 &&
    codes.every((c) => c === "kill" || expectCodes.includes(c)) && !note;
  await proxy.close();
  await sql`drop schema ${sql(schema)} cascade`.catch(() => {});
  await sql.end({ timeout: 1 });
  await Deno.remove(storage, { recursive: true }).catch(() => {});
  return {
    fault,
    enqueued,
    completed: stats.completed,
    failed: stats.failed,
    givenBack,
    doubleRun,
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

const t0 = performance.now();
const rows: Row[] = [];
const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7);
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
// The floods: not in --short (about 25 s).
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
  `chaos: ${rows.filter((r) => r.ok).length + floods.filter((f) => f.ok).length}/${
    rows.length + floods.length
  } rows ok in ${Math.round((performance.now() - t0) / 1000)} s`,
);
await admin.end({ timeout: 1 });
await stopEmbedded();
Deno.exit(rows.every((r) => r.ok) && floods.every((f) => f.ok) ? 0 : 1);
