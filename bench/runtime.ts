/**
 * The runtime section of `deno task bench` (issue 11): per-job database cost, wake latency,
 * drain throughput and memory, each printed beside its issue target with pass/fail.
 *
 * - (a) No-op queue (bench/noop_queue.ts) drained by the real `Consumer`, composed in process as
 *   main.ts `serve()` does (QueueLock, Wake, listenForWakes).
 * - (b) Ingestion of a tiny book by `main.ts`, spawned for real.
 *
 * Counting (the definitions): statements are `pg_stat_statements` top-level calls,
 * utility ones included (`track_utility=on`), by the worker's role only: the bench itself runs
 * as the role `bench_observer`. Transactions are `pg_stat_database.xact_commit` of the database,
 * minus the bench's own (counted as it runs them). WAL writes and syncs come from `pg_stat_io`
 * (`object = 'wal'`, every backend type, the walwriter's included): PostgreSQL 18 moved
 * `wal_write`/`wal_sync` out of `pg_stat_wal`. Backends report their counters when they exit
 * (or after up to 10 s idle), so every worker session is closed before the "after" reading.
 *
 * Needs a server started with `shared_preload_libraries=pg_stat_statements` and
 * `track_commit_timestamp=on` ({@linkcode SERVER_SETTINGS}); otherwise the section says so and
 * is skipped.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { connect, type Sql } from "../lib/db.ts";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import { Wake } from "../lib/wake.ts";
import { listenForWakes } from "../lib/listener.ts";
import { QueueLock } from "../lib/lock.ts";
import { Consumer } from "../lib/consumer.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import * as noop from "./noop_queue.ts";

/** Server settings the runtime section needs, for `startEmbedded({ settings })`. */
export const SERVER_SETTINGS: Readonly<Record<string, string>> = {
  shared_preload_libraries: "pg_stat_statements",
  "pg_stat_statements.track_utility": "on",
  "pg_stat_statements.track": "top",
  track_commit_timestamp: "on",
};

const NOOP_JOBS = 2000;
const INGESTION_JOBS = 500;
const LATENCY_JOBS = 100;
const IDLE_MS = 5000;
const OBSERVER = "bench_observer";
const BOOK = "Bench Book\nby Bench\n\nCHAPTER I\n\nOne.\n\nCHAPTER II\n\nTwo.\n";

interface Counters {
  commits: number;
  walWrites: number;
  walSyncs: number;
}

interface Cost {
  jobs: number;
  statements: number;
  commits: number;
  walWrites: number;
  walSyncs: number;
  top: { calls: number; query: string }[];
}

interface Row {
  metric: string;
  value: string;
  target: string;
  pass: boolean | null;
}

/** A progress line on stderr, so a slow phase on a loaded machine is visible. */
function progress(what: string): void {
  console.error(`bench runtime: ${what} (${new Date().toISOString().slice(11, 19)})`);
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number) {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(250);
  }
}

/** The bench's own connection, as `bench_observer`, so the worker's statements stand apart. */
class Observer {
  readonly url: string;
  readonly schema: string;
  /** Transactions this observer committed since {@linkcode Observer.before}. */
  commits = 0;
  #sql: Sql | undefined;

  constructor(url: string, schema: string) {
    this.url = url;
    this.schema = schema;
  }

  get sql(): Sql {
    this.#sql ??= connect(this.url, { schema: this.schema, applicationName: "bench", max: 1 });
    return this.#sql;
  }

  /** Close the observer's session, so its counters reach the statistics. */
  async close(): Promise<void> {
    await this.#sql?.end({ timeout: 5 });
    this.#sql = undefined;
  }

  /** Reset pg_stat_statements and read the counters, on a fresh session closed at once. */
  async before(): Promise<Counters> {
    await this.close();
    const once = connect(this.url, { schema: this.schema, applicationName: "bench", max: 1 });
    try {
      await once`select public.pg_stat_statements_reset()`;
      const counters = await read(once);
      this.commits = 2; // the reset and the reading
      return counters;
    } finally {
      await once.end({ timeout: 5 });
    }
  }

  /**
   * Wait until only the observer's sessions remain, read the counters and the worker role's
   * statements since {@linkcode Observer.before}.
   */
  async after(from: Counters, jobs: number, workerRole: string): Promise<Cost> {
    await this.close();
    const once = connect(this.url, { schema: this.schema, applicationName: "bench", max: 1 });
    try {
      await until("the worker's sessions to end", async () => {
        const [{ n }] = await once<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where backend_type = 'client backend' and usename <> ${OBSERVER}`;
        return n === 0;
      }, 30_000);
      // An exited backend's counters are flushed at exit; a short pause covers the last one.
      await sleep(200);
      const to = await read(once);
      const [{ n }] = await once<{ n: number }[]>`
        select coalesce(sum(calls), 0)::int as n from public.pg_stat_statements
        where toplevel and userid = (select oid from pg_roles where rolname = ${workerRole})`;
      const top = await once<{ calls: number; query: string }[]>`
        select calls::int, regexp_replace(query, '\\s+', ' ', 'g') as query
        from public.pg_stat_statements
        where toplevel and userid = (select oid from pg_roles where rolname = ${workerRole})
        order by calls desc limit 10`;
      return {
        jobs,
        statements: n / jobs,
        // The observer's own transactions (its reads and the enqueue) are not the worker's.
        commits: (to.commits - from.commits - this.commits) / jobs,
        walWrites: (to.walWrites - from.walWrites) / jobs,
        walSyncs: (to.walSyncs - from.walSyncs) / jobs,
        top,
      };
    } finally {
      await once.end({ timeout: 5 });
    }
  }

  /** Run one statement of the bench's own and count its transaction. */
  query<T extends readonly unknown[]>(
    build: (sql: Sql) => Promise<T>,
  ): Promise<T> {
    this.commits++;
    return build(this.sql);
  }
}

async function read(sql: Sql): Promise<Counters> {
  const [row] = await sql<{ commits: string; writes: string; syncs: string }[]>`
    select (select xact_commit from pg_stat_database where datname = current_database())
             as commits,
           (select coalesce(sum(writes), 0) from pg_stat_io where object = 'wal') as writes,
           (select coalesce(sum(fsyncs), 0) from pg_stat_io where object = 'wal') as syncs`;
  return {
    commits: Number(row.commits),
    walWrites: Number(row.writes),
    walSyncs: Number(row.syncs),
  };
}

/** The no-op queue's consumer, composed as main.ts `serve()` composes a queue's. */
async function startNoopWorker(url: string, schema: string) {
  const log = createLogger("warn");
  const sql = connect(url, { schema, applicationName: "bench-noop" });
  const listenerSql = connect(url, { schema, applicationName: "bench-noop-listener", max: 1 });
  let onClaim: (job: noop.NoopJob | null) => void = () => {};
  let onComplete: (job: noop.NoopJob) => void = () => {};
  const ctx: noop.NoopContext = {
    sql,
    log,
    bootId: crypto.randomUUID(),
    events: new EventHub(),
    onClaim: (job) => onClaim(job),
    onComplete: (job, settled) => {
      if (!settled) throw new Error(`The no-op job ${job.id} lost its claim`);
      onComplete(job);
    },
  };
  const wake = new Wake(noop.name);
  const lock = new QueueLock({ url, schema, queue: noop.name, log });
  const consumer = new Consumer({
    queue: noop,
    ctx,
    lock,
    wake,
    pollIntervalMs: 30_000, // only NOTIFY and the end of a job wake it
    standbyRetryMs: 1000,
    runTimeoutMs: noop.defaults.timeoutMs,
  });
  const listening = await listenForWakes(listenerSql, `${schema}.${noop.table}`, wake, log);
  return {
    consumer,
    set onClaim(f: (job: noop.NoopJob | null) => void) {
      onClaim = f;
    },
    set onComplete(f: (job: noop.NoopJob) => void) {
      onComplete = f;
    },
    async stop(): Promise<void> {
      await consumer.stop(performance.now() + 5000);
      await listening.unlisten();
      await Promise.all([sql.end({ timeout: 5 }), listenerSql.end({ timeout: 5 })]);
    },
  };
}

async function benchNoop(url: string, obs: Observer, workerRole: string) {
  // (a) Per-job cost and throughput: the jobs are queued first, then a fresh consumer drains
  // them, so the figures hold its start (lock, LISTEN) and the final empty claim, amortised.
  await obs.query((sql) =>
    sql`insert into bench_noop_jobs (status) select 'Queued' from generate_series(1, ${NOOP_JOBS})`
  );
  progress(`no-op drain of ${NOOP_JOBS} jobs`);
  const from = await obs.before();
  const worker = await startNoopWorker(url, obs.schema);
  let completed = 0;
  const drained = Promise.withResolvers<void>();
  worker.onComplete = () => void completed++;
  worker.onClaim = (job) => {
    if (!job && completed === NOOP_JOBS) drained.resolve();
  };
  worker.consumer.start();
  const timer = setTimeout(() => drained.reject(new Error("The no-op drain timed out")), 300_000);
  await drained.promise.finally(() => clearTimeout(timer));
  await worker.stop();
  const cost = await obs.after(from, NOOP_JOBS, workerRole);
  const [{ ms }] = await obs.query((sql) =>
    sql<{ ms: number }[]>`
      select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 as ms
      from bench_noop_jobs`
  );
  const jobsPerS = NOOP_JOBS / (Number(ms) / 1000);

  // Wake latency: one job at a time, commit of its INSERT (track_commit_timestamp) → its claim.
  progress(`no-op wake latency, ${LATENCY_JOBS} jobs one at a time`);
  await obs.query((sql) => sql`truncate bench_noop_jobs`);
  const latencyWorker = await startNoopWorker(url, obs.schema);
  const listening = Promise.withResolvers<void>();
  latencyWorker.onClaim = (job) => {
    if (!job) listening.resolve();
  };
  latencyWorker.consumer.start();
  await listening.promise;
  const load = Deno.loadavg();
  for (let i = 0; i < LATENCY_JOBS; i++) {
    const done = Promise.withResolvers<void>();
    latencyWorker.onComplete = () => done.resolve();
    await obs.query((sql) => sql`insert into bench_noop_jobs default values`);
    const timer = setTimeout(() => done.reject(new Error("A latency job was not run")), 10_000);
    await done.promise.finally(() => clearTimeout(timer));
  }
  await latencyWorker.stop();
  const latencies = (await obs.query((sql) =>
    sql<{ ms: number }[]>`
      select extract(epoch from claimed_at - pg_xact_commit_timestamp(enqueued_xid::text::xid))
               * 1000 as ms
      from bench_noop_jobs where status = 'Completed'`
  )).map((r) => Number(r.ms)).sort((a, b) => a - b);
  return { cost, jobsPerS, latencies, load };
}

async function benchIngestion(url: string, obs: Observer, workerRole: string) {
  progress(`ingestion: main.ts idle ${IDLE_MS / 1000} s, ${INGESTION_JOBS} jobs, idle again`);
  const storage = await Deno.makeTempDir({ prefix: "textstack-bench-rt-" });
  await Deno.writeTextFile(`${storage}/book.txt`, BOOK);
  const worker = new Deno.Command(Deno.execPath(), {
    // As the worker is started (deno.json "start", Dockerfile).
    args: [
      "run",
      "-A",
      "--v8-flags=--max-semi-space-size=4",
      new URL("../main.ts", import.meta.url).pathname,
    ],
    env: {
      DATABASE_URL: url,
      DATABASE_SCHEMA: obs.schema,
      PORT: "0",
      INTERNAL_API_TOKEN: "bench-token-0123456789",
      STORAGE_DIR: storage,
      POLL_INTERVAL_MS: "30000",
      LOG_LEVEL: "warn",
    },
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  try {
    await until("the ingestion consumer's lock", async () => {
      const rows = await obs.query((sql) =>
        sql`select 1 from pg_stat_activity where application_name = 'textstack-lock-ingestion'`
      );
      return rows.length > 0;
    }, 60_000);
    await sleep(IDLE_MS);
    const idleRss = rssMiB(worker.pid);
    const from = await obs.before();
    await obs.query((sql) =>
      sql`
        insert into ingestion_jobs (source_path)
        select 'book.txt' from generate_series(1, ${INGESTION_JOBS})`
    );
    await until("the ingestion drain", async () => {
      const [{ n }] = await obs.query((sql) =>
        sql<{ n: number }[]>`
          select count(*)::int as n from ingestion_jobs where status in ('Completed', 'Failed')`
      );
      return n === INGESTION_JOBS;
    }, 600_000);
    const [{ ms, failed }] = await obs.query((sql) =>
      sql<{ ms: number; failed: number }[]>`
        select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 as ms,
               count(*) filter (where status = 'Failed')::int as failed
        from ingestion_jobs`
    );
    if (failed > 0) throw new Error(`${failed} ingestion jobs failed in the bench`);
    await sleep(IDLE_MS);
    const drainedRss = rssMiB(worker.pid);
    worker.kill("SIGTERM");
    await worker.status;
    const cost = await obs.after(from, INGESTION_JOBS, workerRole);
    return { cost, jobsPerS: INGESTION_JOBS / (Number(ms) / 1000), idleRss, drainedRss };
  } finally {
    try {
      worker.kill("SIGTERM");
    } catch {
      // already exited
    }
    await worker.status;
    await Deno.remove(storage, { recursive: true });
  }
}

function printCost(title: string, cost: Cost): void {
  console.log(`\n${title}: per job over ${cost.jobs} jobs`);
  console.log(
    `  statements ${cost.statements.toFixed(2)}, commits ${cost.commits.toFixed(2)}, ` +
      `WAL writes ${cost.walWrites.toFixed(2)}, WAL syncs ${cost.walSyncs.toFixed(2)}`,
  );
  console.log("  top statements by calls (per job · query):");
  for (const { calls, query } of cost.top) {
    console.log(`    ${(calls / cost.jobs).toFixed(3).padStart(7)} · ${query.slice(0, 150)}`);
  }
}

/**
 * Run the runtime section against the server at `url` (a superuser URL, e.g. the embedded
 * server's) and print its figures and the issue-11 targets with pass/fail.
 *
 * @param url `postgres://` URL of a superuser on a server started with {@linkcode SERVER_SETTINGS}.
 * @returns false when the server lacks the settings (the section is skipped, with a message).
 * @throws when a drain times out or a job fails.
 */
export async function runtimeBench(url: string): Promise<boolean> {
  const admin = connect(url, { schema: "public", applicationName: "bench-admin", max: 1 });
  const schema = `bench_rt_${crypto.randomUUID().slice(0, 8)}`;
  const workerRole = new URL(url).username;
  const observerUrl = new URL(url);
  observerUrl.username = OBSERVER;
  observerUrl.password = OBSERVER;
  try {
    const [settings] = await admin<{ preload: string; commitTs: string }[]>`
      select current_setting('shared_preload_libraries') as preload,
             current_setting('track_commit_timestamp') as "commitTs"`;
    if (!settings.preload.includes("pg_stat_statements") || settings.commitTs !== "on") {
      console.log(
        "\nruntime section skipped: the server needs " +
          Object.entries(SERVER_SETTINGS).map(([k, v]) => `${k}=${v}`).join(", "),
      );
      return false;
    }
    await admin`create extension if not exists pg_stat_statements`;
    const [role] = await admin`select 1 from pg_roles where rolname = ${OBSERVER}`;
    if (!role) {
      await admin.unsafe(`create role ${OBSERVER} login superuser password '${OBSERVER}'`);
    }
  } finally {
    await admin.end({ timeout: 5 });
  }

  const obs = new Observer(observerUrl.href, schema);
  await obs.sql`create schema ${obs.sql(schema)}`;
  await migrate(
    obs.sql,
    schema,
    await readMigrations(new URL("../sql/", import.meta.url)),
    createLogger("silent"),
  );
  await noop.createTable(obs.sql);
  try {
    const n = await benchNoop(url, obs, workerRole);
    const ing = await benchIngestion(url, obs, workerRole);

    printCost("(a) no-op queue, real Consumer in process", n.cost);
    printCost("(b) ingestion of a tiny book, main.ts spawned", ing.cost);
    const p50 = percentile(n.latencies, 50);
    const p99 = percentile(n.latencies, 99);
    const load = n.load.map((x) => x.toFixed(2)).join(" ");
    const rows: Row[] = [
      {
        metric: "no-op statements / job",
        value: n.cost.statements.toFixed(2),
        target: "≤ 2",
        pass: n.cost.statements <= 2,
      },
      {
        metric: "no-op commits / job",
        value: n.cost.commits.toFixed(2),
        target: "= 1",
        pass: Math.round(n.cost.commits * 100) === 100,
      },
      {
        metric: "no-op WAL syncs / job",
        value: n.cost.walSyncs.toFixed(2),
        target: "(figure)",
        pass: null,
      },
      {
        metric: "no-op drain",
        value: `${n.jobsPerS.toFixed(0)} jobs/s`,
        target: "≥ 1.5× graphile c1",
        pass: null,
      },
      {
        metric: "ingestion statements / job",
        value: ing.cost.statements.toFixed(2),
        target: "≤ 5",
        pass: ing.cost.statements <= 5,
      },
      {
        metric: "ingestion commits / job",
        value: ing.cost.commits.toFixed(2),
        target: "≤ 2",
        pass: ing.cost.commits <= 2,
      },
      {
        metric: "ingestion WAL syncs / job",
        value: ing.cost.walSyncs.toFixed(2),
        target: "(figure)",
        pass: null,
      },
      {
        metric: "ingestion drain",
        value: `${ing.jobsPerS.toFixed(0)} jobs/s`,
        target: "≥ 1.0× graphile",
        pass: null,
      },
      {
        metric: `wake p50 (n=${LATENCY_JOBS}, load ${load})`,
        value: `${p50.toFixed(2)} ms`,
        target: "≤ 0.5 ms",
        pass: p50 <= 0.5,
      },
      {
        metric: "wake p99",
        value: `${p99.toFixed(2)} ms`,
        target: "≤ 2 ms",
        pass: p99 <= 2,
      },
      {
        metric: "worker RSS idle",
        value: `${ing.idleRss.toFixed(1)} MiB`,
        target: "≤ 70 MB",
        pass: ing.idleRss * 1.048576 <= 70,
      },
      {
        metric: `worker RSS ${IDLE_MS / 1000} s after a ${INGESTION_JOBS}-job drain`,
        value: `${ing.drainedRss.toFixed(1)} MiB`,
        target: "≤ 120 MB",
        pass: ing.drainedRss * 1.048576 <= 120,
      },
    ];
    console.log("\nissue 11 targets (graphile-worker peer: not built yet; its ratios show —)");
    const w = Math.max(...rows.map((r) => r.metric.length));
    for (const r of rows) {
      const verdict = r.pass === null ? "—" : r.pass ? "pass" : "FAIL";
      console.log(
        `  ${r.metric.padEnd(w)}  ${r.value.padStart(13)}  ${r.target.padEnd(18)}  ${verdict}`,
      );
    }
    return true;
  } finally {
    await obs.sql`drop schema if exists ${obs.sql(schema)} cascade`;
    await obs.close();
  }
}
