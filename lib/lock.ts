/**
 * The single-consumer rule, enforced: a per-queue session advisory lock held on a dedicated
 * connection (ADR-022: exactly one sequential consumer per queue). A second process stands by
 * until the lock frees; a holder whose session is lost learns it at once through {@linkcode
 * QueueLock.lost} and must stop claiming.
 *
 * The heartbeat has a deadline and never overlaps itself, so a half-open lock socket keeps `held`
 * true for at most `heartbeatMs + heartbeatTimeoutMs`, after which this process ends its own old
 * session; a standby cannot take the lock before that session ends. When the server ends it first
 * (`pg_terminate_backend`, server-side keepalives) and the socket does not tell, a standby can
 * hold the lock while `held` is still true here: {@linkcode QueueLock.claimFence} is what keeps
 * this process from claiming then, since a claim statement proves in the same statement that this
 * lock session still holds the lock. A run already going goes on until {@linkcode
 * QueueLock.lost} fires.
 * A session advisory lock needs a direct connection (or session pooling): behind a
 * transaction-mode pooler the backend changes under the session, which the heartbeat reports.
 *
 * @module
 */
import type postgres from "postgres";
import type { Logger } from "./log.ts";
import { type Fragment, InRecoveryError, openClient, type Sql } from "./db.ts";

/** The advisory lock key text of a queue; the lock is `hashtextextended(key, 0)`. */
export function lockKey(schema: string, queue: string): string {
  return `textstack:consumer:${schema}.${queue}`;
}

/** The session holding a queue's lock, as `pg_stat_activity` shows it. */
export interface LockHolder {
  /** Backend pid of the holding session. */
  pid: number;
  /** `application_name`, e.g. `textstack-lock-ingestion`. */
  application: string;
  /** Client address of the holder, null for a Unix socket. */
  client: string | null;
  /** When the holder's session started. */
  since: Date;
}

/**
 * Who holds each queue's lock, from `pg_locks` (any process on this database, not only this one).
 *
 * @param queues queue names, e.g. `["ingestion"]`.
 * @returns queue name → holder; a queue nobody holds is absent.
 * @example
 * const holders = await lockHolders(sql, "public", ["ingestion"]);
 * holders.get("ingestion")?.pid;
 */
export async function lockHolders(
  sql: Sql,
  schema: string,
  queues: readonly string[],
): Promise<Map<string, LockHolder>> {
  // pg_locks splits the 64-bit key into classid (high 32 bits) and objid (low 32 bits), with
  // objsubid = 1 for a 64-bit key.
  const rows = await sql<(LockHolder & { queue: string })[]>`
    select q.queue, a.pid, a.application_name as application, a.client_addr::text as client,
           a.backend_start as since
    from unnest(${queues as string[]}::text[], ${
    queues.map((q) => lockKey(schema, q))
  }::text[]) as q(queue, key)
    join pg_locks l on l.locktype = 'advisory' and l.granted and l.objsubid = 1
      and l.database = (select oid from pg_database where datname = current_database())
      and (l.classid::int8 << 32 | l.objid::int8) = hashtextextended(q.key, 0)
    join pg_stat_activity a on a.pid = l.pid`;
  return new Map(rows.map(({ queue, ...holder }) => [queue, holder]));
}

/** Options for {@linkcode QueueLock}. */
export interface QueueLockOptions {
  /** `postgres://` URL. */
  url: string;
  /** Schema of the queue table: the lock is per schema and queue, so test schemas never contend. */
  schema: string;
  /** Queue name, e.g. `ingestion`. */
  queue: string;
  log: Logger;
  /** How often (ms) the holder checks its session is still the one that took the lock (1000). */
  heartbeatMs?: number;
  /** How long (ms) one heartbeat may take before the lock counts as lost (default 5000). */
  heartbeatTimeoutMs?: number;
  /** Prefix of the lock connection's `application_name` (default `textstack`): `<prefix>-lock-<queue>`. */
  applicationName?: string;
}

/**
 * A session advisory lock for one queue.
 *
 * @example
 * const lock = new QueueLock({ url, schema: "public", queue: "ingestion", log });
 * if (await lock.tryAcquire()) {
 *   lock.lost.addEventListener("abort", () => stopClaiming());
 * }
 * await lock.release();
 */
export class QueueLock {
  readonly #options: QueueLockOptions;
  readonly #key: string;
  #sql: postgres.Sql | undefined;
  #pid: number | undefined;
  /** The private key the lock session holds beside the queue's (see claimFence), as text. */
  #fenceKey: string | undefined;
  #lost = new AbortController();
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #checking = false;
  #poolerSuspected = false;

  constructor(options: QueueLockOptions) {
    this.#options = options;
    this.#key = lockKey(options.schema, options.queue);
  }

  get #applicationName(): string {
    return `${this.#options.applicationName ?? "textstack"}-lock-${this.#options.queue}`;
  }

  /** Aborted when a held lock's session is lost (connection closed or replaced). */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** The backend pid of the session holding the lock, while held (for logs and tests). */
  get backendPid(): number | undefined {
    return this.held ? this.#pid : undefined;
  }

  /** Whether this process holds the lock now. */
  get held(): boolean {
    return this.#pid !== undefined && !this.#lost.signal.aborted;
  }

  /**
   * Whether the lock session's backend changed under it (a transaction-mode pooler between the
   * worker and PostgreSQL). Readiness shows it; the worker needs a direct
   * connection.
   */
  get poolerSuspected(): boolean {
    return this.#poolerSuspected;
  }

  /**
   * A SQL condition, true only while this lock's session holds the advisory lock: a claim ANDs it
   * into its WHERE so a process whose lock was lost (half-open socket, replaced session) cannot
   * claim, even before its heartbeat notices.
   *
   * How: with the queue's lock, the lock session takes a second session lock on a
   * private key, random for each acquisition, which nothing else ever takes. The condition is a
   * failed shared try of that key: it fails only while a session holds the key exclusively, which
   * only this lock session ever does, and only while it lives. One lock-manager probe, where
   * reading `pg_locks` would copy the whole lock table on every claim
   * (about 0.1 ms of a no-op job's 1.1 ms). When the key is free (the session is gone) the try succeeds,
   * the condition is false and the claim takes nothing; the shared lock it took ends with the
   * claim's transaction. A scalar subquery, so it is evaluated once per statement, not per row.
   *
   * @param sql the client the claim runs on (the pool, or the transaction it runs in).
   * @returns a postgres.js fragment; false in SQL when the lock is not held (claim nothing).
   * @example
   * await sql`update jobs set … where id = (select …) and ${lock.claimFence(sql)}`;
   */
  claimFence(sql: postgres.Sql | postgres.TransactionSql): Fragment {
    if (!this.held || this.#fenceKey === undefined) return sql`false`;
    return sql`(select not pg_try_advisory_xact_lock_shared(${this.#fenceKey}::int8))`;
  }

  /**
   * Try once to take the lock.
   *
   * @returns true when this process now holds it (a fresh {@linkcode lost} signal goes with it);
   *   false when another session holds it.
   * @throws the connection error when the database cannot be reached; {@linkcode
   *   InRecoveryError} when the server is in recovery (a standby).
   */
  async tryAcquire(): Promise<boolean> {
    if (this.held) return true;
    await this.#close();
    // A dedicated connection that never idles out or retires: the lock lives as long as it does.
    const sql = openClient(this.#options.url, {
      max: 1,
      idle_timeout: 0,
      max_lifetime: null,
      connect_timeout: 10,
      onnotice: () => {},
      connection: {
        application_name: `${
          this.#options.applicationName ?? "textstack"
        }-lock-${this.#options.queue}`,
      },
      onclose: () => this.#markLost("connection closed"),
    });
    this.#sql = sql;
    // A random signed 64-bit key, never 0: the private key of this acquisition (claimFence).
    const fenceKey = crypto.getRandomValues(new BigInt64Array(1))[0] || 1n;
    try {
      // No lock on a server in recovery (a standby, whatever the URL's target_session_attrs let
      // through): it is not where the queue's rows are written, and a promotion elsewhere would
      // leave two holders. Checked in the same statement that takes the lock.
      const [row] = await sql<
        { recovering: boolean; locked: boolean; fenced: boolean | null; pid: number }[]
      >`
        select recovering, locked, pg_backend_pid() as pid,
               case when locked then pg_try_advisory_lock(${fenceKey.toString()}::int8) end
                 as fenced
        from (select recovering,
                     case when not recovering
                       then pg_try_advisory_lock(hashtextextended(${this.#key}, 0)) end as locked
              from (select pg_is_in_recovery() as recovering offset 0) as server offset 0)
          as queue`;
      if (row.recovering) {
        throw new InRecoveryError(
          `The ${this.#options.queue} queue lock's server is in recovery (a standby): no lock is ` +
            "taken there; waiting for a primary",
        );
      }
      if (!row.locked) {
        await this.#close();
        return false;
      }
      if (!row.fenced) throw new Error("The lock's private fence key is taken; try again");
      this.#lost = new AbortController();
      this.#pid = row.pid;
      this.#fenceKey = fenceKey.toString();
      this.#heartbeat = setInterval(() => this.#check(), this.#options.heartbeatMs ?? 1000);
      return true;
    } catch (err) {
      await this.#close();
      throw err;
    }
  }

  /** Release the lock (if held) and close its connection; never throws. */
  async release(): Promise<void> {
    if (this.held && this.#sql) {
      // Bounded: on a half-open socket the unlock never answers; closing the session frees the
      // lock anyway once the server notices.
      // Both keys: the queue's and the private fence key (claimFence); the session is ours alone.
      const unlock = this.#sql`select pg_advisory_unlock_all()`;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        unlock.catch(() => {}),
        new Promise((r) => (timer = setTimeout(r, this.#options.heartbeatTimeoutMs ?? 5000))),
      ]);
      clearTimeout(timer);
    }
    this.#pid = undefined;
    this.#fenceKey = undefined;
    await this.#close();
  }

  // postgres.js reconnects transparently, so "a query worked" is not proof: the lock belongs to
  // the session, and a different backend pid means a different session that does not hold it.
  // One check at a time, each with a deadline: a half-open socket never answers, and stacked
  // checks behind it would keep `held` true for as long as TCP takes to give up.
  async #check(): Promise<void> {
    const sql = this.#sql;
    if (!sql || !this.held || this.#checking) return;
    this.#checking = true;
    const timeoutMs = this.#options.heartbeatTimeoutMs ?? 5000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), timeoutMs)));
      const row = await Promise.race([
        sql<{ pid: number }[]>`select pg_backend_pid() as pid`.then(([r]) => r),
        late,
      ]);
      // Released or replaced meanwhile: this answer is about a session we no longer hold.
      if (this.#sql !== sql || this.#pid === undefined) return;
      if (row === "late") {
        const pid = this.#pid!;
        this.#markLost(`heartbeat took longer than ${timeoutMs} ms`);
        await this.#close();
        // The server may not notice a half-open socket for hours, and its session would hold the
        // lock all along, keeping every instance (this one too) standing by: end it ourselves.
        await this.#terminate(pid);
      } else if (row.pid !== this.#pid) {
        if (!this.#poolerSuspected) {
          this.#poolerSuspected = true;
          this.#options.log.warn(
            { queue: this.#options.queue, was: this.#pid, now: row.pid },
            "lock session changed backend: is a transaction-mode pooler in the way? The worker needs a direct connection",
          );
        }
        this.#markLost("session replaced");
      }
    } catch {
      this.#markLost("heartbeat failed");
    } finally {
      clearTimeout(timer);
      this.#checking = false;
    }
  }

  // End our own abandoned lock session, by pid and name (a pid reused by another client is not
  // ours to end). Best effort, bounded by the connect timeout.
  async #terminate(pid: number): Promise<void> {
    const sql = openClient(this.#options.url, { max: 1, connect_timeout: 5, onnotice: () => {} });
    try {
      await sql`
        select pg_terminate_backend(pid) from pg_stat_activity
        where pid = ${pid} and application_name = ${this.#applicationName}`;
    } catch (err) {
      this.#options.log.warn(
        { queue: this.#options.queue, pid, err: String(err) },
        "cannot end the old lock session",
      );
    } finally {
      await sql.end({ timeout: 1 }).catch(() => {});
    }
  }

  #markLost(why: string): void {
    if (this.#pid === undefined || this.#lost.signal.aborted) return;
    this.#options.log.error({ queue: this.#options.queue, why }, "queue lock lost");
    this.#lost.abort(new Error(`Lost the ${this.#options.queue} queue lock: ${why}`));
    clearInterval(this.#heartbeat);
  }

  async #close(): Promise<void> {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    const sql = this.#sql;
    this.#sql = undefined;
    if (sql) await sql.end({ timeout: 1 }).catch(() => {});
  }
}
