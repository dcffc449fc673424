/**
 * Prometheus metrics, on a private prom-client `Registry`, every name prefixed
 * `textstack_worker_`, per-queue series labelled `queue` (never a job or edition id).
 *
 * - Point-in-time gauges (jobs by status, oldest runnable age, open breakers, connections) are
 *   filled at scrape time in `collect` from the background {@linkcode StatsCache}, never queried
 *   per scrape; lock-held and subscriber gauges read live process state; the listener's and the
 *   bounded channels' cumulative counts are read at scrape time too.
 * - Counters and histograms are fed from the job events through {@linkcode EventHub.observe}: a
 *   synchronous O(1) update inside `publish`, so every event is counted (a subscriber may drop
 *   events; an observer cannot) and no queue waits on metrics (ADR-052).
 * - Every queue's series exist from startup (`inc(…, 0)`, `zero()`).
 * - With `processMetrics`, prom-client's default process series beside them, unprefixed as
 *   every Prometheus client names them: `process_resident_memory_bytes`, `process_cpu_*`,
 *   `process_open_fds` and `process_max_fds` (read from /proc on Linux, as under Node, when the
 *   process has every permission; else the resident memory from `Deno.memoryUsage()` and no
 *   descriptor counts: {@linkcode withoutProcSelf}),
 *   `nodejs_eventloop_lag_*` (sampled every 100 ms, not prom-client's 10 ms: an idle worker
 *   should not wake 100 times a second), `nodejs_heap_*`.
 *
 * @module
 */
import { Hono } from "hono";
import { bearerGuard } from "../http/bearer.ts";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EventHub, SequencedEvent } from "../events.ts";
import type { StatsCache } from "./stats_cache.ts";
import type { QueueView } from "./queue_view.ts";

/** The default series prom-client reads from /proc/self on Linux (a 0 when it cannot). */
const PROC_SELF_SERIES = [
  "process_resident_memory_bytes",
  "process_virtual_memory_bytes",
  "process_heap_bytes",
  "process_open_fds",
  "process_max_fds",
];

/**
 * Whether this process may read /proc/self: Deno grants a /proc/<pid>/ file only with every
 * permission (denoland/deno#23703), so under explicit permissions (deno.json `start`, the image's
 * entrypoint) it may not.
 */
function procSelfReadable(): boolean {
  try {
    Deno.readTextFileSync("/proc/self/stat");
    return true;
  } catch {
    return false;
  }
}

/**
 * Without /proc/self, prom-client's series from it would read 0: they are left out, and the
 * resident memory comes from `Deno.memoryUsage().rss` instead (the descriptor counts, virtual
 * memory and data segment have no other source).
 */
function withoutProcSelf(registry: Registry): void {
  for (const name of PROC_SELF_SERIES) registry.removeSingleMetric(name);
  new Gauge({
    name: "process_resident_memory_bytes",
    help: "Resident memory size in bytes.",
    registers: [registry],
    collect() {
      this.set(Deno.memoryUsage().rss);
    },
  });
}

/** Prefix of every metric name. */
export const METRIC_PREFIX = "textstack_worker_";

/** Live process state the metrics read at scrape time. */
export interface MetricsDeps {
  views: readonly QueueView[];
  cache: StatsCache;
  events: EventHub;
  /** Whether this process holds a queue's lock now, by queue name. */
  lockHeld: (queue: string) => boolean;
  /**
   * Cumulative items dropped per named bounded channel (ADR-052's dropped counter), read at
   * scrape time, e.g. `{ events: hub.droppedTotal }`.
   */
  channelDrops: () => Record<string, number>;
  /** Pool sizes (`max`) by pool name, e.g. `{ pool: 10, listener: 1 }`. */
  poolMax: Readonly<Record<string, number>>;
  /** The listener's cumulative reconnects and missed probes (lib/listener.ts), when there is one. */
  listener?: { readonly reconnects: number; readonly probeFailures: number };
  /** Whether a queue is paused now (lib/control.ts), by queue name. */
  paused?: (queue: string) => boolean;
  /**
   * Register prom-client's default process series too (main.ts does; its event-loop sampler runs
   * until the process ends, so a test that builds metrics in-process leaves it off).
   */
  processMetrics?: boolean;
}

/**
 * A counter fed from a cumulative total read at scrape time: it grows by what the total grew
 * since the last scrape, and never goes down.
 */
function cumulative(
  counter: Counter<string>,
  labels: Record<string, string>,
  seen: Map<string, number>,
  total: number,
): void {
  const key = JSON.stringify(labels);
  const before = seen.get(key) ?? 0;
  if (total > before) counter.inc(labels, total - before);
  else counter.inc(labels, 0);
  seen.set(key, Math.max(total, before));
}

// Transition → the counter it feeds.
const COUNTED = {
  claimed: "claims",
  completed: "completions",
  failed: "failures",
  given_back: "give_backs",
  recovered: "recoveries",
  retried: "retries",
  cancelled: "cancellations",
} as const;

/**
 * Build the registry and start counting events.
 *
 * @returns the registry (serve `await registry.metrics()` as `registry.contentType`) and a
 *   function that stops observing events.
 * @example
 * const { registry } = createMetrics({ views, cache, events, lockHeld, channelDrops, poolMax });
 * const text = await registry.metrics();
 */
export function createMetrics(deps: MetricsDeps): { registry: Registry; stop: () => void } {
  const registry = new Registry();
  const p = METRIC_PREFIX;
  const queues = deps.views.map((v) => v.name);
  // Only a queue consumed in this process has a lock here; a host-polled one has none.
  const locked = deps.views.filter((v) => v.consumer === "worker").map((v) => v.name);
  const registers = [registry];

  new Gauge({
    name: `${p}jobs`,
    help: "Jobs by queue and status, from the last background count (refreshed about every 10 s)",
    labelNames: ["queue", "status"],
    registers,
    collect() {
      const snap = deps.cache.snapshot;
      for (const view of deps.views) {
        const by = snap?.queues.get(view.name)?.stats.byStatus;
        for (const status of view.statuses) {
          this.set({ queue: view.name, status }, by?.[status] ?? 0);
        }
      }
    },
  });
  new Gauge({
    name: `${p}oldest_runnable_age_seconds`,
    help: "Age of the oldest job that could be claimed now, s (0 when none), from the last count",
    labelNames: ["queue"],
    registers,
    collect() {
      for (const queue of queues) {
        const age = deps.cache.snapshot?.queues.get(queue)?.stats.oldestRunnableAgeS;
        this.set({ queue }, age ?? 0);
      }
    },
  });
  new Gauge({
    name: `${p}stats_age_seconds`,
    help: "Seconds since the background count behind the job gauges last succeeded",
    registers,
    collect() {
      const at = deps.cache.snapshot?.at;
      this.set(at ? Math.max(0, (Date.now() - at.getTime()) / 1000) : -1);
    },
  });
  const paused = deps.paused;
  new Gauge({
    name: `${p}queue_paused`,
    help: "1 while the queue is paused (no instance claims its jobs; lib/control.ts), else 0",
    labelNames: ["queue"],
    registers,
    collect() {
      for (const queue of queues) this.set({ queue }, paused?.(queue) ? 1 : 0);
    },
  });
  if (deps.processMetrics) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
    if (Deno.build.os === "linux" && !procSelfReadable()) withoutProcSelf(registry);
  }
  new Gauge({
    name: `${p}lock_held`,
    help: "1 when this process holds the queue's consumer lock (ADR-022), else 0",
    labelNames: ["queue"],
    registers,
    collect() {
      for (const queue of locked) this.set({ queue }, deps.lockHeld(queue) ? 1 : 0);
    },
  });

  const counters = Object.fromEntries(
    Object.values(COUNTED).map((what) => [
      what,
      new Counter({
        name: `${p}${what}_total`,
        help: `Job ${what.replace("_", "-")} by queue, from the job events of this process`,
        labelNames: ["queue"],
        registers,
      }),
    ]),
  ) as Record<(typeof COUNTED)[keyof typeof COUNTED], Counter<"queue">>;
  const runDuration = new Histogram({
    name: `${p}run_duration_seconds`,
    help:
      "Time from a job's claim to its settle (completed, failed or given back) in this process, s",
    labelNames: ["queue"],
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900],
    registers,
  });
  const wakeLatency = new Histogram({
    name: `${p}wake_latency_seconds`,
    help: "Database time from a job becoming runnable (its committing write or run_after) " +
      "to its claim, s; stale re-picks excluded",
    labelNames: ["queue"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  for (const queue of queues) {
    for (const counter of Object.values(counters)) counter.inc({ queue }, 0);
    runDuration.zero({ queue });
    wakeLatency.zero({ queue });
  }

  // Claim time per job in flight (a sequential queue has at most one per queue).
  const claimedAt = new Map<string, number>();
  const stop = deps.events.observe((event: SequencedEvent) => {
    counters[COUNTED[event.transition]]?.inc({ queue: event.queue });
    const key = `${event.queue}\u0000${event.id}`;
    if (event.transition === "claimed") {
      claimedAt.set(key, performance.now());
      if (typeof event.runnableForS === "number") {
        wakeLatency.observe({ queue: event.queue }, Math.max(0, event.runnableForS));
      }
    } else if (
      event.transition === "completed" || event.transition === "failed" ||
      event.transition === "given_back" || event.transition === "cancelled"
    ) {
      const start = claimedAt.get(key);
      claimedAt.delete(key);
      if (start !== undefined) {
        runDuration.observe({ queue: event.queue }, (performance.now() - start) / 1000);
      }
    }
  });

  new Gauge({
    name: `${p}event_stream_subscribers`,
    help: "Open event streams (/internal/events and the dashboard's)",
    registers,
    collect() {
      this.set(deps.events.subscribers);
    },
  });
  const seenDrops = new Map<string, number>();
  new Counter({
    name: `${p}channel_dropped_total`,
    help: "Items a bounded channel dropped because its reader fell behind (ADR-052)",
    labelNames: ["channel"],
    registers,
    collect() {
      for (const [channel, total] of Object.entries(deps.channelDrops())) {
        cumulative(this, { channel }, seenDrops, total);
      }
    },
  });
  const listener = deps.listener;
  if (listener) {
    const seen = new Map<string, number>();
    new Counter({
      name: `${p}listener_reconnects_total`,
      help: "Times the LISTEN connection was re-established (after a drop or a missed probe)",
      registers,
      collect() {
        cumulative(this, {}, seen, listener.reconnects);
      },
    });
    const seenMisses = new Map<string, number>();
    new Counter({
      name: `${p}listener_probe_failures_total`,
      help: "NOTIFY round-trip probes that did not come back in time (the listener was deaf)",
      registers,
      collect() {
        cumulative(this, {}, seenMisses, listener.probeFailures);
      },
    });
  }
  const breakers = deps.views.filter((v) => v.openBreakers).map((v) => v.name);
  new Gauge({
    name: `${p}breakers_open`,
    help: "Open breakers of a queue that has one (auto-publish: editions with 5 Failed jobs " +
      "in 24 h, ADR-022 row 5), from the last background count",
    labelNames: ["queue"],
    registers,
    collect() {
      for (const queue of breakers) {
        this.set({ queue }, deps.cache.snapshot?.queues.get(queue)?.openBreakers ?? 0);
      }
    },
  });
  new Gauge({
    name: `${p}db_pool_max`,
    help: "Most connections each of this process's postgres.js clients may open",
    labelNames: ["pool"],
    registers,
    collect() {
      for (const [pool, max] of Object.entries(deps.poolMax)) this.set({ pool }, max);
    },
  });
  new Gauge({
    name: `${p}db_connections`,
    help: "Database backends of every textstack instance by application_name and state, " +
      "from pg_stat_activity in the last background count",
    labelNames: ["application", "state"],
    registers,
    collect() {
      this.reset();
      for (const c of deps.cache.snapshot?.connections ?? []) {
        this.set({ application: c.application, state: c.state }, c.count);
      }
    },
  });
  for (const view of deps.views) view.metrics?.(registry, p);
  return { registry, stop };
}

/**
 * `GET /metrics`: the registry in the Prometheus text format, behind a bearer token (every refusal
 * 401 with `WWW-Authenticate: Bearer`, lib/http/bearer.ts).
 *
 * @param token `METRICS_TOKEN` when set, else `INTERNAL_API_TOKEN`.
 * @returns a Hono app to mount at the root.
 * @example
 * createApi({ …, apps: [metricsRoutes(registry, token)] });
 */
export function metricsRoutes(registry: Registry, token: string): Hono {
  const app = new Hono();
  app.use("/metrics", bearerGuard(token, "METRICS_TOKEN", "textstack-metrics"));
  app.get("/metrics", async (c) => {
    const body = await registry.metrics();
    return c.body(body, 200, { "content-type": registry.contentType });
  });
  return app;
}
