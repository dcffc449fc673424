/**
 * How the runtime section counts: the bench's own connection, as the role
 * `bench_observer`, reads `pg_stat_statements` (top-level calls, utility ones included), the
 * database's committed transactions (`pg_stat_database.xact_commit`) and the WAL writes and syncs
 * (`pg_stat_io`, `object = 'wal'`; PostgreSQL 18 moved them out of `pg_stat_wal`), before and
 * after a drain. Everything the worker's role ran in between is the worker's; the observer counts
 * its own transactions and takes them off.
 *
 * Backends report their transaction and I/O counters when they exit, after 10 s idle, or at most
 * 60 s late, so every worker session must be closed before the "after" reading;
 * `pg_stat_statements` counts at once. That lag skews a window: a session busy at least every 10 s
 * (a lock heartbeat each second) holds the commits of statements it ran before the "before"
 * reading until it exits, inside the window (measured: a session querying each second for 11 s,
 * then read and closed 0.5 s later, showed 13 commits and 2 statements in that window). The
 * runtime section therefore also counts a control window, the same protocol with no jobs, and
 * takes it off ({@linkcode Cost.totals}). One correction: postgres.js sends a transaction's COMMIT as a prepared statement, and
 * `pg_stat_statements` counts a reused prepared COMMIT only the first time (checked on PostgreSQL
 * 18: 10 `sql.begin` transactions showed 10 BEGINs and 1 COMMIT), so each BEGIN without a counted
 * COMMIT or ROLLBACK is added as one statement: a statement here is a round trip.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { connect, type Sql } from "../lib/db.ts";

/** The role the bench's own connections use. */
export const OBSERVER = "bench_observer";

/** Server counters at one moment. */
export interface Counters {
  commits: number;
  walWrites: number;
  walSyncs: number;
  /** Total WAL sync time, ms (0 unless `track_wal_io_timing` is on). */
  walSyncTimeMs: number;
}

/** Raw counts of one window, before dividing by the jobs. */
export interface Totals {
  statements: number;
  commits: number;
  walWrites: number;
  walSyncs: number;
  /** Server execution time of the worker role's statements, ms (`total_exec_time`). */
  execMs: number;
}

/** What a drain cost, per job (a window of 0 jobs, a control, gives its totals per 1). */
export interface Cost {
  jobs: number;
  /** The window's raw counts. */
  totals: Totals;
  /** Server execution time per job, ms. */
  execMs: number;
  /** Round trips: pg_stat_statements' calls plus the COMMITs it did not count (see above). */
  statements: number;
  /** Of which COMMITs pg_stat_statements did not count. */
  uncountedCommits: number;
  commits: number;
  walWrites: number;
  walSyncs: number;
  /** The worker role's statements, most called first, with their mean execution time (ms). */
  top: { calls: number; meanMs: number; query: string }[];
  /** Mean WAL sync time over the window, ms (`track_wal_io_timing`; null when it is off). */
  walSyncMs: number | null;
}

/** A progress line on stderr, so a slow phase on a loaded machine is visible. */
export function progress(what: string): void {
  console.error(`bench runtime: ${what} (${new Date().toISOString().slice(11, 19)})`);
}

/** The `p`th percentile (0–100) of an ascending list. */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Resident memory of a process, in MiB (`VmRSS`). */
export function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** Poll `check` every 250 ms until it answers true. @throws after `timeoutMs`. */
export async function until(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(250);
  }
}

/** The bench's own connection, as `bench_observer`, so the worker's statements stand apart. */
export class Observer {
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

  /** Statements the worker role ran since the last reset (they count at once, no session end). */
  async statements(workerRole: string): Promise<number> {
    this.commits++;
    const [{ n }] = await this.sql<{ n: number }[]>`
      select coalesce(sum(calls), 0)::int as n from public.pg_stat_statements
      where toplevel and userid = (select oid from pg_roles where rolname = ${workerRole})`;
    return n;
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
      const [{ n, uncounted, execMs }] = await once<
        { n: number; uncounted: number; execMs: number }[]
      >`
        select coalesce(sum(calls), 0)::int as n,
               greatest(0, coalesce(sum(calls) filter (where query ilike 'begin%'), 0)
                 - coalesce(sum(calls) filter (where query ilike any(array['commit%', 'rollback%'])), 0)
               )::int as uncounted,
               coalesce(sum(total_exec_time), 0)::float8 as "execMs"
        from public.pg_stat_statements
        where toplevel and userid = (select oid from pg_roles where rolname = ${workerRole})`;
      const top = await once<{ calls: number; meanMs: number; query: string }[]>`
        select calls::int, mean_exec_time::float8 as "meanMs",
               regexp_replace(query, '\\s+', ' ', 'g') as query
        from public.pg_stat_statements
        where toplevel and userid = (select oid from pg_roles where rolname = ${workerRole})
        order by calls desc limit 16`;
      const totals: Totals = {
        statements: n + uncounted,
        // The observer's own transactions (its reads and the enqueue) are not the worker's.
        commits: to.commits - from.commits - this.commits,
        walWrites: to.walWrites - from.walWrites,
        walSyncs: to.walSyncs - from.walSyncs,
        execMs,
      };
      const per = Math.max(1, jobs);
      return {
        jobs,
        totals,
        execMs: execMs / per,
        statements: totals.statements / per,
        uncountedCommits: uncounted / per,
        commits: totals.commits / per,
        walWrites: totals.walWrites / per,
        walSyncs: totals.walSyncs / per,
        walSyncMs: totals.walSyncs > 0 && to.walSyncTimeMs > 0
          ? (to.walSyncTimeMs - from.walSyncTimeMs) / totals.walSyncs
          : null,
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
  const [row] = await sql<
    { commits: string; writes: string; syncs: string; syncTime: number }[]
  >`
    select (select xact_commit from pg_stat_database where datname = current_database())
             as commits,
           (select coalesce(sum(writes), 0) from pg_stat_io where object = 'wal') as writes,
           (select coalesce(sum(fsyncs), 0) from pg_stat_io where object = 'wal') as syncs,
           (select coalesce(sum(fsync_time), 0)::float8 from pg_stat_io where object = 'wal')
             as "syncTime"`;
  return {
    commits: Number(row.commits),
    walWrites: Number(row.writes),
    walSyncs: Number(row.syncs),
    walSyncTimeMs: Number(row.syncTime),
  };
}

/** Print a drain's cost per job and its most called statements. */
export function printCost(title: string, cost: Cost): void {
  console.log(`\n${title}: per job over ${cost.jobs} jobs`);
  console.log(
    `  statements ${cost.statements.toFixed(2)} (of which uncounted COMMITs ` +
      `${cost.uncountedCommits.toFixed(2)}), commits ${cost.commits.toFixed(2)}, ` +
      `WAL writes ${cost.walWrites.toFixed(2)}, WAL syncs ${cost.walSyncs.toFixed(2)}` +
      `${cost.walSyncMs === null ? "" : ` (${cost.walSyncMs.toFixed(3)} ms each)`}, ` +
      `server execution ${cost.execMs.toFixed(3)} ms`,
  );
  console.log("  top statements by calls (per job · mean execution ms · query):");
  for (const { calls, meanMs, query } of cost.top) {
    console.log(
      `    ${(calls / cost.jobs).toFixed(3).padStart(7)} · ${meanMs.toFixed(3).padStart(6)} · ` +
        query.slice(0, 130),
    );
  }
}
