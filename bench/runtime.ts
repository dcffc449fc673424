/**
 * The runtime section of `deno task bench`: per-job database cost, wake latency,
 * drain throughput, memory and scale, each printed beside its target with pass/fail; with
 * `--peer`, graphile-worker beside it (bench/peer.ts) and the ratios the targets name.
 *
 * - (a) No-op queue (examples/noop/mod.ts) drained by the real `Consumer`, composed in process as
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
 * `main.ts`, migrations and ingestion module instead; (a) and the peer always run this checkout's
 * code, and each round also drains this checkout's `main.ts` right after the checkout's, in a
 * schema and storage of its own, for its rate (before and after in one run).
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
import * as noop from "../examples/noop/mod.ts";
import {
  type Cost,
  OBSERVER,
  Observer,
  percentile,
  printCost,
  progress,
  rssMiB,
  until,
} from "./_observer.ts";
import { printScale, scaleBench } from "./scale.ts";
import { GRAPHILE_VERSION, installPeer, type PeerRun, runPeer } from "./peer.ts";
import { startArgs } from "./_start_command.ts";

/** Server settings the runtime section needs, for `startEmbedded({ settings })`. */
export const SERVER_SETTINGS: Readonly<Record<string, string>> = {
  shared_preload_libraries: "pg_stat_statements",
  "pg_stat_statements.track_utility": "on",
  "pg_stat_statements.track": "top",
  track_commit_timestamp: "on",
  // The WAL sync's own time, printed beside the syncs (pg_stat_io.fsync_time).
  track_wal_io_timing: "on",
};

/** Options for {@linkcode runtimeBench}. */
export interface RuntimeOptions {
  /** Also run graphile-worker (npm, under Node) and print the ratios (`--peer`). */
  peer?: boolean;
  /** Run the scale part (c) (default true; `--no-scale` skips its 1M-row fill). */
  scale?: boolean;
  /** Measure another checkout's main.ts, migrations and ingestion module in (b) and (c). */
  checkout?: string;
  /**
   * Rounds of drains (default 1). The first is counted; each round drains the no-op queue, the
   * peer's no-op, the ingestion, the peer's comparable work, in that order, and the drain ratios
   * are the median of the rounds' (interleaved rounds: a noisy minute hits both).
   */
  rounds?: number;
}

const NOOP_JOBS = 2000;
/** Ingestion jobs in (b): the memory target is the RSS once idle after a 2,000-job drain. */
export const INGESTION_JOBS = 2000;
const LATENCY_JOBS = 100;
/**
 * Jobs drained before the counted drain, by the same worker: each statement's first use on each
 * pooled connection costs a parse round (an empty commit of its own), and startup costs are not a
 * job's; the counted drain then shows what each further job costs.
 */
export const WARMUP_JOBS = 200;
/** Idle time before RSS readings, ms. */
export const IDLE_MS = 5000;
/**
 * Idle time of a worker before its drain is counted, ms: an idle backend reports its transaction
 * counters only after 10 s (PostgreSQL's PGSTAT_IDLE_INTERVAL), and a worker's startup must not
 * be counted as its drain's.
 */
export const SETTLE_MS = 11_000;
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
  let onClaimSent: () => void = () => {};
  let onWake: () => void = () => {};
  const ctx: noop.NoopContext = {
    sql,
    log,
    bootId: crypto.randomUUID(),
    events: new EventHub(),
    onClaim: (job) => onClaim(job),
    onClaimSent: () => onClaimSent(),
    onComplete: (job, settled) => {
      if (!settled) throw new Error(`The no-op job ${job.id} lost its claim`);
      onComplete(job);
    },
  };
  const wake = new Wake(noop.name);
  // Seen by the wake latency's breakdown: every wake (NOTIFY, poll, end of a job) as it happens.
  const notify = wake.notify.bind(wake);
  wake.notify = () => {
    onWake();
    notify();
  };
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
  let stopped: Promise<void> | undefined;
  return {
    consumer,
    set onClaim(f: (job: noop.NoopJob | null) => void) {
      onClaim = f;
    },
    set onComplete(f: (job: noop.NoopJob) => void) {
      onComplete = f;
    },
    set onClaimSent(f: () => void) {
      onClaimSent = f;
    },
    set onWake(f: () => void) {
      onWake = f;
    },
    // Idempotent: the drain stops it before its reading, and again on the way out of a failure.
    stop(): Promise<void> {
      return stopped ??= (async () => {
        await consumer.stop(performance.now() + 5000);
        await listening.unlisten();
        await Promise.all([sql.end({ timeout: 5 }), listenerSql.end({ timeout: 5 })]);
      })();
    },
  };
}

/** One drain's figures; the counts only when the drain was counted. */
interface Drain {
  jobsPerS: number;
  cost?: Cost;
  backgroundPerS?: number;
  backgroundPerJob?: number;
}

// (a) The no-op queue's drain, measured as (b) and the peer are: the consumer is up and idle, a
// warm-up batch is drained, the worker settles (its counters reported), then the jobs arrive in
// one INSERT. Uncounted (`count` false): the drain rate only, for the interleaved rounds.
async function drainNoop(
  url: string,
  obs: Observer,
  workerRole: string,
  count: boolean,
  jobs = NOOP_JOBS,
): Promise<Drain> {
  progress(
    jobs === 0
      ? "no-op control window (no jobs)"
      : `no-op drain of ${jobs} jobs${count ? "" : " (rate only)"}`,
  );
  await obs.query((sql) => sql`truncate noop_jobs`);
  const worker = await startNoopWorker(url, obs.schema);
  let completed = 0;
  let target = 0;
  let idle = Promise.withResolvers<void>();
  worker.onComplete = () => void completed++;
  worker.onClaim = (job) => {
    if (!job && completed === target) idle.resolve();
  };
  const batch = async (jobs: number) => {
    target += jobs;
    idle = Promise.withResolvers<void>();
    const timer = setTimeout(() => idle.reject(new Error("The no-op drain timed out")), 300_000);
    await obs.query((sql) =>
      sql`insert into noop_jobs (status) select 'Queued' from generate_series(1, ${jobs})`
    );
    await idle.promise.finally(() => clearTimeout(timer));
  };
  try {
    worker.consumer.start();
    await idle.promise;
    await batch(WARMUP_JOBS);
    const [{ last }] = await obs.query((sql) =>
      sql<{ last: string }[]>`select max(id) as last from noop_jobs`
    );
    let from, backgroundPerS;
    if (count) {
      await obs.before();
      await sleep(SETTLE_MS);
      backgroundPerS = (await obs.statements(workerRole)) / (SETTLE_MS / 1000);
      from = await obs.before();
    }
    if (jobs > 0) await batch(jobs);
    await worker.stop();
    const cost = from ? await obs.after(from, jobs, workerRole) : undefined;
    if (jobs === 0) return { jobsPerS: NaN, cost, backgroundPerS };
    const [{ ms }] = await obs.query((sql) =>
      sql<{ ms: number }[]>`
        select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 as ms
        from noop_jobs where id > ${last}`
    );
    const drainS = Number(ms) / 1000;
    return {
      jobsPerS: jobs / drainS,
      cost,
      backgroundPerS,
      backgroundPerJob: backgroundPerS && (backgroundPerS * drainS) / jobs,
    };
  } finally {
    await worker.stop();
  }
}

/** Milliseconds since the epoch, with the monotonic clock's resolution. */
function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** One wake's path, ms from the enqueuing commit (`track_commit_timestamp`). */
interface WakePath {
  /** Commit → the listener's callback woke the consumer (the server's flush and signal, the socket). */
  heard: number;
  /** Commit → the claim handed to the driver (adds the consumer's own turn). */
  sent: number;
  /** Commit → the claim's row write (`claimed_at`): the wake latency. */
  claimed: number;
  /** The enqueuer's COMMIT returned → the claim's row write (the enqueuer's WAL sync not in it). */
  afterAck: number;
}

// Wake latency: one job at a time, commit of its INSERT (track_commit_timestamp) → its claim,
// with where the time went: the worker's clock (epoch ms) is compared with the server's, both
// this machine's real-time clock.
async function wakeLatency(url: string, obs: Observer) {
  progress(`no-op wake latency, ${LATENCY_JOBS} jobs one at a time`);
  await obs.query((sql) => sql`truncate noop_jobs`);
  const latencyWorker = await startNoopWorker(url, obs.schema);
  const listening = Promise.withResolvers<void>();
  latencyWorker.onClaim = (job) => {
    if (!job) listening.resolve();
  };
  latencyWorker.consumer.start();
  await listening.promise;
  const load = Deno.loadavg();
  const seen: { heard: number; sent: number; acked: number }[] = [];
  for (let i = 0; i < LATENCY_JOBS; i++) {
    const done = Promise.withResolvers<void>();
    const at = { heard: NaN, sent: NaN, acked: NaN };
    seen.push(at);
    latencyWorker.onComplete = () => done.resolve();
    latencyWorker.onWake = () => void (isNaN(at.heard) && (at.heard = epochMs()));
    latencyWorker.onClaimSent = () => void (isNaN(at.sent) && (at.sent = epochMs()));
    await obs.query((sql) => sql`insert into noop_jobs default values`);
    at.acked = epochMs();
    const timer = setTimeout(() => done.reject(new Error("A latency job was not run")), 10_000);
    await done.promise.finally(() => clearTimeout(timer));
    latencyWorker.onWake = () => {};
    latencyWorker.onClaimSent = () => {};
  }
  await latencyWorker.stop();
  const rows = await obs.query((sql) =>
    sql<{ committed: number; claimed: number }[]>`
      select extract(epoch from pg_xact_commit_timestamp(enqueued_xid::text::xid)) * 1000
               as committed,
             extract(epoch from claimed_at) * 1000 as claimed
      from noop_jobs where status = 'Completed' order by id`
  );
  const paths: WakePath[] = rows.map((r, i) => ({
    heard: seen[i].heard - Number(r.committed),
    sent: seen[i].sent - Number(r.committed),
    claimed: Number(r.claimed) - Number(r.committed),
    afterAck: Number(r.claimed) - seen[i].acked,
  }));
  const latencies = paths.map((p) => p.claimed).sort((a, b) => a - b);
  return { latencies, paths, load };
}

/** (b)'s figures: a drain's, and the worker's memory. */
interface IngestionDrain extends Drain {
  idleRss: number;
  drainedRss: number;
}

// (b) Ingestion by main.ts, spawned: idle RSS after IDLE_MS, a warm-up batch, the settle, the
// counted drain, the RSS IDLE_MS after it. Uncounted (`count` false): rate and memory only.
async function drainIngestion(
  url: string,
  obs: Observer,
  workerRole: string,
  storage: string,
  main: string,
  count: boolean,
  jobs = INGESTION_JOBS,
): Promise<IngestionDrain> {
  progress(
    jobs === 0
      ? `ingestion control window (no jobs): ${main}`
      : `ingestion: ${main}, ${jobs} jobs${count ? "" : " (rate only)"}`,
  );
  await obs.query((sql) => sql`truncate ingestion_jobs, auto_publish_jobs, editions cascade`);
  const worker = new Deno.Command(Deno.execPath(), {
    // As that checkout starts its worker (its deno.json "start", its Dockerfile).
    args: startArgs(main.replace(/\/main\.ts$/, "")),
    env: {
      DATABASE_URL: url,
      DATABASE_SCHEMA: obs.schema,
      PORT: "0",
      INTERNAL_API_TOKEN: "bench-token-0123456789",
      STORAGE_DIR: storage,
      // By the clock and lumpy: the poll tick (its recovery sweep and a claim of its own), the
      // dashboard's background count (14 statements at once every 10 s) and the listener probe
      // fall inside a 10 s drain window or not (±0.007 per job each). Moved out of the windows;
      // the steady rest (a lock heartbeat per queue each second) is taken off by its idle rate.
      POLL_INTERVAL_MS: "600000",
      STATS_INTERVAL_MS: "600000",
      LISTENER_PROBE_MS: "600000",
      LOG_LEVEL: "warn",
    },
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  let target = 0;
  const batch = async (jobs: number) => {
    target += jobs;
    await obs.query((sql) =>
      sql`
        insert into ingestion_jobs (source_path)
        select 'book.txt' from generate_series(1, ${jobs})`
    );
    await until("the ingestion drain", async () => {
      const [{ n }] = await obs.query((sql) =>
        sql<{ n: number }[]>`
          select count(*)::int as n from ingestion_jobs where status in ('Completed', 'Failed')`
      );
      return n === target;
    }, 900_000);
  };
  try {
    await until("the ingestion consumer's lock", async () => {
      const rows = await obs.query((sql) =>
        sql`select 1 from pg_stat_activity where application_name = 'textstack-lock-ingestion'`
      );
      return rows.length > 0;
    }, 60_000);
    await sleep(IDLE_MS);
    const idleRss = rssMiB(worker.pid);
    await batch(WARMUP_JOBS);
    const [{ last }] = await obs.query((sql) =>
      sql<{ last: string }[]>`select max(id) as last from ingestion_jobs`
    );
    let from, backgroundPerS;
    if (count) {
      // What the worker runs by the clock while idle (lock heartbeats, probes, poll ticks); and
      // the wait lets every backend report its counters before the "before" reading.
      await obs.before();
      await sleep(SETTLE_MS);
      backgroundPerS = (await obs.statements(workerRole)) / (SETTLE_MS / 1000);
      from = await obs.before();
    }
    if (jobs === 0) {
      await sleep(IDLE_MS); // as the counted drain waits before its RSS reading
      worker.kill("SIGTERM");
      await worker.status;
      const cost = from ? await obs.after(from, 0, workerRole) : undefined;
      return { jobsPerS: NaN, cost, backgroundPerS, idleRss, drainedRss: NaN };
    }
    await batch(jobs);
    const [{ ms, failed }] = await obs.query((sql) =>
      sql<{ ms: number; failed: number }[]>`
        select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 as ms,
               count(*) filter (where status = 'Failed')::int as failed
        from ingestion_jobs where id > ${last}`
    );
    if (failed > 0) throw new Error(`${failed} ingestion jobs failed in the bench`);
    await sleep(IDLE_MS);
    const drainedRss = rssMiB(worker.pid);
    worker.kill("SIGTERM");
    await worker.status;
    const cost = from ? await obs.after(from, jobs, workerRole) : undefined;
    const drainS = Number(ms) / 1000;
    return {
      jobsPerS: jobs / drainS,
      cost,
      backgroundPerS,
      backgroundPerJob: backgroundPerS && (backgroundPerS * drainS) / jobs,
      idleRss,
      drainedRss,
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
 * server's) and print its figures and their targets with pass/fail.
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
  // ingestion's, migrated by the checkout whose main.ts runs there; with a checkout, a third for
  // this checkout's own ingestion drain beside it (before and after in one run).
  const here = new URL("../", import.meta.url);
  const noopObs = new Observer(observerUrl.href, `${schema}_noop`);
  const obs = new Observer(observerUrl.href, schema);
  const ownObs = options.checkout ? new Observer(observerUrl.href, `${schema}_own`) : null;
  const schemas: [Observer, URL][] = [[noopObs, here], [obs, root]];
  if (ownObs) schemas.push([ownObs, here]);
  for (const [o, dir] of schemas) {
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
  // This checkout's drain writes its editions apart: both schemas number them from 1.
  const ownStorage = `${storage}/own`;
  await Deno.mkdir(ownStorage);
  await Deno.writeTextFile(`${ownStorage}/book.txt`, BOOK);
  try {
    const main = new URL("main.ts", root).pathname;
    const peer = options.peer && await installPeer();
    const waits = { idleMs: IDLE_MS, settleMs: SETTLE_MS, warmup: WARMUP_JOBS };
    const rounds: Array<
      { n: Drain; pn?: PeerRun; ing: IngestionDrain; own?: IngestionDrain; pi?: PeerRun }
    > = [];
    for (let r = 0; r < Math.max(1, options.rounds ?? 1); r++) {
      const count = r === 0;
      const n = await drainNoop(url, noopObs, workerRole, count);
      const pn = peer
        ? await runPeer(url, obs, workerRole, "noop", NOOP_JOBS, storage, waits, count)
        : undefined;
      const ing = await drainIngestion(url, obs, workerRole, storage, main, count);
      const own = ownObs
        ? await drainIngestion(
          url,
          ownObs,
          workerRole,
          ownStorage,
          new URL("main.ts", here).pathname,
          false,
        )
        : undefined;
      const pi = peer
        ? await runPeer(url, obs, workerRole, "ingest", INGESTION_JOBS, storage, waits, count)
        : undefined;
      rounds.push({ n, pn, ing, own, pi });
    }
    const { n, pn: peerNoop, ing, pi: peerIngest } = rounds[0];
    // The control windows: the counted protocol with no jobs (bench/_observer.ts says why).
    const noopControl = (await drainNoop(url, noopObs, workerRole, true, 0)).cost!;
    const ingControl = (await drainIngestion(url, obs, workerRole, storage, main, true, 0)).cost!;
    const { latencies, paths, load } = await wakeLatency(url, noopObs);
    const scale = options.scale === false
      ? null
      : await scaleBench(url, observerUrl.href, options.checkout);

    const background = (perS: number, perJob: number, control: Cost) =>
      console.log(
        `  of which by the clock, not by the jobs: ${perS.toFixed(1)} statements/s while idle ` +
          `(lock heartbeats, listener probe, poll ticks), each its own commit ≈ ` +
          `${perJob.toFixed(3)} per job at this drain rate\n` +
          `  and the control window (same protocol, no jobs): ${control.totals.statements} ` +
          `statements, ${control.totals.commits} commits (the stop's unlock and unlisten, and ` +
          `the by-the-clock commits run before the window that PostgreSQL reports only when ` +
          `their session exits)`,
      );
    printCost("(a) no-op queue, real Consumer in process", n.cost!);
    background(n.backgroundPerS!, n.backgroundPerJob!, noopControl);
    printCost(
      `(b) ingestion of a tiny book, ${options.checkout ?? "this checkout"}'s main.ts`,
      ing.cost!,
    );
    background(ing.backgroundPerS!, ing.backgroundPerJob!, ingControl);
    if (peerNoop && peerIngest) {
      printCost(`(p1) graphile-worker ${GRAPHILE_VERSION} c1, no-op`, peerNoop.cost!);
      printCost(
        `(p2) graphile-worker ${GRAPHILE_VERSION} c1, read the file, insert rows, write a file`,
        peerIngest.cost!,
      );
    }
    // Drain rates per round, and the median ratio to the peer.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const rates = (pick: (r: (typeof rounds)[number]) => number) => rounds.map(pick);
    const noopRates = rates((r) => r.n.jobsPerS);
    const ingRates = rates((r) => r.ing.jobsPerS);
    const noopRatio = peer ? median(rounds.map((r) => r.n.jobsPerS / r.pn!.jobsPerS)) : null;
    const ingRatio = peer ? median(rounds.map((r) => r.ing.jobsPerS / r.pi!.jobsPerS)) : null;
    console.log(`\ndrain rates, jobs/s, ${rounds.length} round(s):`);
    const list = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(", ");
    console.log(
      `  no-op ${list(noopRates)}${peer ? `; graphile ${list(rates((r) => r.pn!.jobsPerS))}` : ""}`,
    );
    const ownRates = ownObs ? rates((r) => r.own!.jobsPerS) : null;
    const ownRatio = peer && ownObs
      ? median(rounds.map((r) => r.own!.jobsPerS / r.pi!.jobsPerS))
      : null;
    console.log(
      `  ingestion ${list(ingRates)}${options.checkout ? ` (${options.checkout})` : ""}${
        ownRates ? `; this checkout ${list(ownRates)}` : ""
      }${peer ? `; graphile ${list(rates((r) => r.pi!.jobsPerS))}` : ""}`,
    );
    if (ownRates) {
      console.log(
        `  worker RSS of this checkout idle / ${IDLE_MS / 1000} s after the drain, MB: ` +
          rounds.map((r) =>
            `${mb(r.own!.idleRss).toFixed(0)} / ${mb(r.own!.drainedRss).toFixed(0)}`
          ).join(", "),
      );
    }
    console.log(
      `  worker RSS idle / ${IDLE_MS / 1000} s after the drain, MB: ` +
        rounds.map((r) => `${mb(r.ing.idleRss).toFixed(0)} / ${mb(r.ing.drainedRss).toFixed(0)}`)
          .join(", "),
    );
    // Where a job's time goes: the wall time per job beside the server's part of it.
    const budget = (what: string, rate: number, cost: Cost) =>
      console.log(
        `  ${what}: ${(1000 / rate).toFixed(3)} ms per job, of which server execution ` +
          `${cost.execMs.toFixed(3)} ms and ${cost.walSyncs.toFixed(2)} WAL syncs` +
          `${cost.walSyncMs === null ? "" : ` × ${cost.walSyncMs.toFixed(3)} ms`}; the rest is ` +
          `the worker's own time and the round trips`,
      );
    console.log("\nper-job time (first round):");
    budget("no-op", n.jobsPerS, n.cost!);
    budget("ingestion", ing.jobsPerS, ing.cost!);
    if (peerNoop && peerIngest) {
      budget("graphile no-op", peerNoop.jobsPerS, peerNoop.cost!);
      budget("graphile comparable", peerIngest.jobsPerS, peerIngest.cost!);
    }
    const pct = (pick: (p: WakePath) => number, q: number) =>
      percentile(paths.map(pick).sort((a, b) => a - b), q).toFixed(2);
    console.log(
      `\nwake path, ms after the enqueuing commit (p50 / p99; the commit timestamp is taken ` +
        `before that commit's own WAL sync, and the NOTIFY leaves after it):`,
    );
    const steps: [string, (p: WakePath) => number][] = [
      ["listener heard it, consumer woken", (p) => p.heard],
      ["claim handed to the driver", (p) => p.sent],
      ["claim's row written (claimed_at)", (p) => p.claimed],
      ["the same, from the enqueuer's COMMIT returning", (p) => p.afterAck],
    ];
    for (const [what, pick] of steps) {
      console.log(`  ${what.padEnd(46)} ${pct(pick, 50)} / ${pct(pick, 99)}`);
    }
    const scaleVerdict = scale ? printScale(scale) : null;
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const afterAck = paths.map((p) => p.afterAck).sort((a, b) => a - b);
    const ackP50 = percentile(afterAck, 50);
    const ackP99 = percentile(afterAck, 99);
    const loadText = load.map((x) => x.toFixed(2)).join(" ");
    const ratio = (rates: number[], r: number | null) =>
      `${median(rates).toFixed(0)} jobs/s${r === null ? "" : ` = ${r.toFixed(2)}×`}`;
    // Gross as counted, and net: less the control window's count and what the worker does by the
    // clock during the drain (measured idle); the verdict is on the net figure, the cost the jobs
    // themselves add.
    const net = (d: Drain, control: Cost, key: "statements" | "commits") =>
      (d.cost!.totals[key] - control.totals[key]) / d.cost!.jobs - d.backgroundPerJob!;
    const both = (d: Drain, control: Cost, key: "statements" | "commits") =>
      `${d.cost![key].toFixed(2)} (net ${net(d, control, key).toFixed(3)})`;
    const rows: Row[] = [
      {
        metric: "no-op statements / job",
        value: both(n, noopControl, "statements"),
        target: "≤ 2",
        pass: net(n, noopControl, "statements") <= 2,
      },
      {
        metric: "no-op commits / job",
        value: both(n, noopControl, "commits"),
        target: "= 1",
        pass: Math.round(net(n, noopControl, "commits") * 100) === 100,
      },
      {
        metric: "no-op WAL syncs / job",
        value: n.cost!.walSyncs.toFixed(2),
        target: "(figure)",
        pass: null,
      },
      {
        metric: "no-op drain vs graphile c1 no-op",
        value: ratio(noopRates, noopRatio),
        target: "≥ 1.5×",
        pass: noopRatio === null ? null : noopRatio >= 1.5,
      },
      {
        metric: "ingestion statements / job",
        value: both(ing, ingControl, "statements"),
        target: "≤ 5",
        pass: net(ing, ingControl, "statements") <= 5,
      },
      {
        metric: "ingestion commits / job",
        value: both(ing, ingControl, "commits"),
        target: "≤ 2",
        pass: Math.round(net(ing, ingControl, "commits") * 100) <= 200,
      },
      {
        metric: "ingestion WAL syncs / job",
        value: ing.cost!.walSyncs.toFixed(2),
        target: "(figure)",
        pass: null,
      },
      {
        metric: "ingestion drain vs graphile comparable",
        value: ratio(ingRates, ingRatio),
        target: "≥ 1.0×",
        pass: ingRatio === null ? null : ingRatio >= 1.0,
      },
      ...(ownRates
        ? [{
          metric: "  the same, this checkout's main.ts",
          value: ratio(ownRates, ownRatio),
          target: "≥ 1.0×",
          pass: ownRatio === null ? null : ownRatio >= 1.0,
        }]
        : []),
      {
        metric: `wake p50, commit timestamp → claim (n=${LATENCY_JOBS}, load ${loadText})`,
        value: `${p50.toFixed(2)} ms`,
        target: "≤ 0.5 ms",
        pass: p50 <= 0.5,
      },
      {
        metric: "wake p99, commit timestamp → claim",
        value: `${p99.toFixed(2)} ms`,
        target: "≤ 2 ms",
        pass: p99 <= 2,
      },
      // The commit timestamp is taken before the enqueuing commit's WAL sync, and its NOTIFY
      // leaves after it: the same latency from the moment the COMMIT returned to the enqueuer.
      {
        metric: "wake p50, enqueuer's COMMIT returned → claim",
        value: `${ackP50.toFixed(2)} ms`,
        target: "≤ 0.5 ms",
        pass: ackP50 <= 0.5,
      },
      {
        metric: "wake p99, enqueuer's COMMIT returned → claim",
        value: `${ackP99.toFixed(2)} ms`,
        target: "≤ 2 ms",
        pass: ackP99 <= 2,
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
      `\ntargets (load average ${Deno.loadavg().map((x) => x.toFixed(2)).join(" ")} ` +
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
    for (const o of [noopObs, obs, ...(ownObs ? [ownObs] : [])]) {
      await o.sql`drop schema if exists ${o.sql(o.schema)} cascade`;
      await o.close();
    }
    await Deno.remove(storage, { recursive: true });
  }
}
