/**
 * The background cacher of queue depths (River UI's query cacher): every `intervalMs` (± jitter)
 * it runs each queue's own `stats`, `throughput` (and `openBreakers` where the queue has a
 * breaker) and the lock-holder query once, and `/admin` and
 * `/metrics` read the last snapshot. Counting job rows can get slow on a big table, so it never
 * runs per request, per scrape or per event-stream subscriber.
 *
 * @module
 */
import type { Sql } from "../db.ts";
import type { Logger } from "../log.ts";
import type { QueueStats } from "../queue.ts";
import type { QueueView, Throughput } from "./queue_view.ts";
import { type LockHolder, lockHolders } from "../lock.ts";

/** Connections to the database by application and state, from `pg_stat_activity`. */
export interface ConnectionCount {
  application: string;
  state: string;
  count: number;
}

/** One queue in a refresh. */
export interface QueueSnapshot {
  readonly stats: QueueStats;
  /** Jobs settled in the last hour. */
  readonly lastHour: Throughput;
  /** The session holding the queue's lock; null when nobody holds it (or it has none). */
  readonly holder: LockHolder | null;
  /** Open breakers, for a queue that has one (QueueView.openBreakers); else null. */
  readonly openBreakers: number | null;
}

/** One refresh's results. */
export interface StatsSnapshot {
  /** Database time the refresh ran. */
  readonly at: Date;
  /** Queue name → what was counted for it. */
  readonly queues: ReadonlyMap<string, QueueSnapshot>;
  /** Backends whose `application_name` starts with `textstack` (every instance on this DB). */
  readonly connections: readonly ConnectionCount[];
}

/** Options for {@linkcode StatsCache}. */
export interface StatsCacheOptions {
  sql: Sql;
  /** The schema of the queue tables (the lock keys include it). */
  schema: string;
  views: readonly QueueView[];
  log: Logger;
  /** Time between refreshes, ms (default 10 000). */
  intervalMs?: number;
  /** Up to this much (ms) is added or taken from each interval at random (default 1 000). */
  jitterMs?: number;
}

/**
 * Refreshes a {@linkcode StatsSnapshot} in the background.
 *
 * @example
 * const cache = new StatsCache({ sql, schema, views, log });
 * cache.start();
 * cache.snapshot?.queues.get("ingestion")?.stats.byStatus.Queued;
 * cache.stop();
 */
export class StatsCache {
  readonly #o: Required<StatsCacheOptions>;
  #snapshot: StatsSnapshot | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(options: StatsCacheOptions) {
    this.#o = { intervalMs: 10_000, jitterMs: 1_000, ...options };
  }

  /** How often the count runs, in ms (± the jitter): `STATS_INTERVAL_MS`. */
  get intervalMs(): number {
    return this.#o.intervalMs;
  }

  /** The last completed refresh; undefined before the first one. */
  get snapshot(): StatsSnapshot | undefined {
    return this.#snapshot;
  }

  /** Refresh now, then every interval (± jitter) until {@linkcode stop}. */
  start(): void {
    this.#stopped = false;
    void this.refresh().finally(() => this.#schedule());
  }

  /** Stop refreshing; an in-flight refresh finishes on its own. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /**
   * Run every queue's statements once and replace the snapshot. Concurrent calls share one run.
   * A failing statement is logged and keeps the previous snapshot.
   */
  refresh(): Promise<void> {
    this.#running ??= this.#refresh().finally(() => (this.#running = undefined));
    return this.#running;
  }

  #schedule(): void {
    if (this.#stopped) return;
    const { intervalMs, jitterMs } = this.#o;
    const delay = Math.max(100, intervalMs + (Math.random() * 2 - 1) * jitterMs);
    this.#timer = setTimeout(() => void this.refresh().finally(() => this.#schedule()), delay);
    Deno.unrefTimer(this.#timer);
  }

  async #refresh(): Promise<void> {
    const { sql, schema, views } = this.#o;
    try {
      // One statement at a time: a refresh holds at most one pool connection, so it never
      // crowds the claims and the API out of the pool (10) in a burst every interval.
      const [{ at }] = await sql<{ at: Date }[]>`select now() as at`;
      const holders = await lockHolders(
        sql,
        schema,
        views.filter((v) => v.consumer === "worker").map((v) => v.name),
      );
      const connections = await sql<ConnectionCount[]>`
        select application_name as application, coalesce(state, 'unknown') as state,
               count(*)::int as count
        from pg_stat_activity
        where datname = current_database() and application_name like 'textstack%'
        group by 1, 2`;
      const queues = new Map<string, QueueSnapshot>();
      for (const view of views) {
        queues.set(view.name, {
          stats: await view.stats(sql),
          lastHour: await view.throughput(sql, 3600),
          holder: holders.get(view.name) ?? null,
          openBreakers: view.openBreakers ? await view.openBreakers(sql) : null,
        });
      }
      this.#snapshot = { at, connections, queues };
    } catch (err) {
      this.#o.log.warn({ err: String(err) }, "queue stats refresh failed; keeping the last");
    }
  }
}
