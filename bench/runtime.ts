/**
 * The runtime section of `deno task bench` (issue 11): per-job database cost, wake latency,
 * drain throughput, memory and scale, each printed beside its issue target with pass/fail; with
 * `--peer`, graphile-worker beside it (bench/peer.ts) and the ratios the targets name.
 *
 * - (a) No-op queue (bench/noop_queue.ts) drained by the real `Consumer`, composed in process as
 *   main.ts `serve()` does (QueueLock, Wake, listenForWakes).
 * - (b) Ingestion of a tiny book by `main.ts`, spawned for real: {@linkcode INGESTION_JOBS} jobs,
 *   its RSS idle before them and {@linkcode IDLE_MS} after them.
 * - (c) Scale (bench/scale.ts): claim and recovery on an empty table, with 1M finished rows, with
 *   100k queued rows.
 *
 * Counting (bench/_observer.ts): statements are `pg_stat_statements` top-level calls, utility
 * ones included, by the worker's role only; transactions are `pg_stat_database.xact_commit` minus
 * the bench's own; WAL writes and syncs come from `pg_stat_io`. The figures are gross: they hold
 * what the worker does by the clock while the jobs run (lock heartbeats, the listener's probe, the
 * other queues' poll ticks), which the ingestion part measures alone while idle and prints beside.
 *
 * Needs a server started with `shared_preload_libraries=pg_stat_statements` and
 * `track_commit_timestamp=on` ({@linkcode SERVER_SETTINGS}); otherwise the section says so and
 * is skipped. With a checkout (`--checkout <dir>`), parts (b) and (c) measure that checkout's
 * `main.ts`, migrations and ingestion module instead (before/after on one server); (a) and the
 * peer always run this checkout's code.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "../lib/db.ts";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import { Wake } from "../lib/wake.ts";
import { listenForWakes } from "../lib/listener.ts";
import { QueueLock } from "../lib/lock.ts";
import { Consumer } from "../lib/consumer.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import * as noop from "./noop_queue.ts";
import { OBSERVER, Observer, percentile, printCost, progress, rssMiB, until } from "./_observer.ts";
import { printScale, scaleBench } from "./scale.ts";
import { GRAPHILE_VERSION, installPeer, type PeerRun, runPeer } from "./peer.ts";

/** Server settings the runtime section needs, for `startEmbedded({ settings })`. */
export const SERVER_SETTINGS: Readonly<Record<string, string>> = {
  shared_preload_libraries: "pg_stat_statements",
  "pg_stat_statements.track_utility": "on",
  "pg_stat_statements.track": "top",
  track_commit_timestamp: "on",
};

/** Options for {@linkcode runtimeBench}. */
export interface RuntimeOptions {
  /** Also run graphile-worker (npm, under Node) and print the ratios (`--peer`). */
  peer?: boolean;
  /** Run the scale part (c) (default true; `--no-scale` skips its 1M-row fill). */
  scale?: boolean;
  /** Measure another checkout's main.ts, migrations and ingestion module in (b) and (c). */
  checkout?: string;
}

const NOOP_JOBS = 2000;
/** Ingestion jobs in (b): the memory target is the RSS once idle after a 2,000-job drain. */
export const INGESTION_JOBS = 2000;
const LATENCY_JOBS = 100;
/** Idle time before RSS readings, ms. */
export const IDLE_MS = 5000;
const BOOK = "Bench Book\nby Bench\n\nCHAPTER I\n\nOne.\n\nCHAPTER II\n\nTwo.\n";

interface Row {
  metric: string;
  value: string;
  target: string;
  pass: boolean | null;
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

async function benchIngestion(
  url: string,
  obs: Observer,
  workerRole: string,
  storage: string,
  main: string,
) {
  progress(`ingestion: ${main} idle ${IDLE_MS / 1000} s, ${INGESTION_JOBS} jobs, idle again`);
  const worker = new Deno.Command(Deno.execPath(), {
    // As the worker is started (deno.json "start", Dockerfile).
    args: ["run", "-A", "--v8-flags=--max-semi-space-size=4", main],
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
    // What the worker runs by the clock while idle (lock heartbeats, probes, poll ticks).
    await obs.before();
    await sleep(IDLE_MS);
    const backgroundPerS = (await obs.statements(workerRole)) / (IDLE_MS / 1000);
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
    }, 900_000);
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
    const drainS = Number(ms) / 1000;
    return {
      cost,
      jobsPerS: INGESTION_JOBS / drainS,
      idleRss,
      drainedRss,
      backgroundPerJob: (backgroundPerS * drainS) / INGESTION_JOBS,
      backgroundPerS,
    };
  } finally {
    try {
      worker.kill("SIGTERM");
    } catch {
      // already exited
    }
    await worker.status;
  }
}

const mb = (mib: number) => mib * 1.048576;

/**
 * Run the runtime section against the server at `url` (a superuser URL, e.g. the embedded
 * server's) and print its figures and the issue-11 targets with pass/fail.
 *
 * @param url `postgres://` URL of a superuser on a server started with {@linkcode SERVER_SETTINGS}.
 * @param options the peer, the scale part, another checkout.
 * @returns false when the server lacks the settings (the section is skipped, with a message).
 * @throws when a drain times out or a job fails.
 */
export async function runtimeBench(url: string, options: RuntimeOptions = {}): Promise<boolean> {
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

  const root = options.checkout
    ? new URL(`file://${Deno.realPathSync(options.checkout)}/`)
    : new URL("../", import.meta.url);
  // Two schemas: the no-op queue's, migrated by this checkout (its triggers need sql/009), and the
  // ingestion's, migrated by the checkout whose main.ts runs there.
  const noopObs = new Observer(observerUrl.href, `${schema}_noop`);
  const obs = new Observer(observerUrl.href, schema);
  for (const [o, dir] of [[noopObs, new URL("../", import.meta.url)], [obs, root]] as const) {
    await o.sql`create schema ${o.sql(o.schema)}`;
    await migrate(
      o.sql,
      o.schema,
      await readMigrations(new URL("sql/", dir)),
      createLogger("silent"),
    );
  }
  await noop.createTable(noopObs.sql);
  const storage = await Deno.makeTempDir({ prefix: "textstack-bench-rt-" });
  await Deno.writeTextFile(`${storage}/book.txt`, BOOK);
  try {
    const n = await benchNoop(url, noopObs, workerRole);
    const ing = await benchIngestion(
      url,
      obs,
      workerRole,
      storage,
      new URL("main.ts", root).pathname,
    );
    let peerNoop: PeerRun | undefined;
    let peerIngest: PeerRun | undefined;
    if (options.peer && await installPeer()) {
      peerNoop = await runPeer(url, obs, workerRole, "noop", NOOP_JOBS, storage, IDLE_MS);
      peerIngest = await runPeer(url, obs, workerRole, "ingest", INGESTION_JOBS, storage, IDLE_MS);
    }
    const scale = options.scale === false
      ? null
      : await scaleBench(url, observerUrl.href, options.checkout);

    printCost("(a) no-op queue, real Consumer in process", n.cost);
    printCost(
      `(b) ingestion of a tiny book, ${options.checkout ?? "this checkout"}'s main.ts`,
      ing.cost,
    );
    console.log(
      `  of which by the clock, not by the jobs: ${ing.backgroundPerS.toFixed(1)} statements/s ` +
        `while idle (lock heartbeats, listener probe, poll ticks) ≈ ` +
        `${ing.backgroundPerJob.toFixed(2)} per job at this drain rate`,
    );
    if (peerNoop && peerIngest) {
      printCost(`(p1) graphile-worker ${GRAPHILE_VERSION} c1, no-op`, peerNoop.cost);
      printCost(
        `(p2) graphile-worker ${GRAPHILE_VERSION} c1, read the file, insert rows, write a file`,
        peerIngest.cost,
      );
    }
    const scaleVerdict = scale ? printScale(scale) : null;
    const p50 = percentile(n.latencies, 50);
    const p99 = percentile(n.latencies, 99);
    const load = n.load.map((x) => x.toFixed(2)).join(" ");
    const ratio = (ours: number, peer: PeerRun | undefined) =>
      peer ? ` = ${(ours / peer.jobsPerS).toFixed(2)}× (${peer.jobsPerS.toFixed(0)}/s)` : "";
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
        metric: "no-op drain vs graphile c1 no-op",
        value: `${n.jobsPerS.toFixed(0)} jobs/s${ratio(n.jobsPerS, peerNoop)}`,
        target: "≥ 1.5×",
        pass: peerNoop ? n.jobsPerS / peerNoop.jobsPerS >= 1.5 : null,
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
        metric: "ingestion drain vs graphile comparable",
        value: `${ing.jobsPerS.toFixed(0)} jobs/s${ratio(ing.jobsPerS, peerIngest)}`,
        target: "≥ 1.0×",
        pass: peerIngest ? ing.jobsPerS / peerIngest.jobsPerS >= 1.0 : null,
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
        value: `${mb(ing.idleRss).toFixed(1)} MB`,
        target: "≤ 70 MB",
        pass: mb(ing.idleRss) <= 70,
      },
      {
        metric: `worker RSS ${IDLE_MS / 1000} s after a ${INGESTION_JOBS}-job drain`,
        value: `${mb(ing.drainedRss).toFixed(1)} MB`,
        target: "≤ 120 MB",
        pass: mb(ing.drainedRss) <= 120,
      },
      {
        metric: "claim/recover, 1M finished and 100k queued",
        value: scale ? "see scale" : "skipped",
        target: "≤ 1.2× empty",
        pass: scaleVerdict?.pass ?? null,
      },
    ];
    if (peerNoop && peerIngest) {
      rows.push({
        metric: "graphile RSS idle / after the no-op drain",
        value: `${mb(peerNoop.rssIdle).toFixed(0)} / ${mb(peerNoop.rssAfter).toFixed(0)} MB`,
        target: "(figure)",
        pass: null,
      }, {
        metric: "graphile RSS after the comparable drain",
        value: `${mb(peerIngest.rssAfter).toFixed(0)} MB`,
        target: "(figure)",
        pass: null,
      });
    }
    console.log(
      `\nissue 11 targets (load average ${Deno.loadavg().map((x) => x.toFixed(2)).join(" ")} ` +
        `on ${navigator.hardwareConcurrency} cores${
          peerNoop ? "" : "; graphile-worker ratios with --peer"
        })`,
    );
    const w = Math.max(...rows.map((r) => r.metric.length));
    const v = Math.max(...rows.map((r) => r.value.length));
    for (const r of rows) {
      const verdict = r.pass === null ? "—" : r.pass ? "pass" : "FAIL";
      console.log(
        `  ${r.metric.padEnd(w)}  ${r.value.padStart(v)}  ${r.target.padEnd(13)}  ${verdict}`,
      );
    }
    return true;
  } finally {
    for (const o of [noopObs, obs]) {
      await o.sql`drop schema if exists ${o.sql(o.schema)} cascade`;
      await o.close();
    }
    await Deno.remove(storage, { recursive: true });
  }
}
