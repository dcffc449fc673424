/**
 * The single-consumer rule, enforced: a per-queue session advisory lock held on a dedicated
 * connection (ADR-022: exactly one sequential consumer per queue). A second process stands by
 * until the lock frees; a holder whose session is lost learns it at once through {@linkcode
 * QueueLock.lost} and must stop claiming.
 *
 * @module
 */
import postgres from "postgres";
import type { Logger } from "./log.ts";

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
  #lost = new AbortController();
  #heartbeat: ReturnType<typeof setInterval> | undefined;

  constructor(options: QueueLockOptions) {
    this.#options = options;
    this.#key = `textstack:consumer:${options.schema}.${options.queue}`;
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
   * Try once to take the lock.
   *
   * @returns true when this process now holds it (a fresh {@linkcode lost} signal goes with it);
   *   false when another session holds it.
   * @throws the connection error when the database cannot be reached.
   */
  async tryAcquire(): Promise<boolean> {
    if (this.held) return true;
    await this.#close();
    // A dedicated connection that never idles out or retires: the lock lives as long as it does.
    const sql = postgres(this.#options.url, {
      max: 1,
      idle_timeout: 0,
      max_lifetime: null,
      connect_timeout: 10,
      onnotice: () => {},
      connection: { application_name: `textstack-lock-${this.#options.queue}` },
      onclose: () => this.#markLost("connection closed"),
    });
    this.#sql = sql;
    try {
      const [row] = await sql<{ locked: boolean; pid: number }[]>`
        select pg_try_advisory_lock(hashtextextended(${this.#key}, 0)) as locked,
               pg_backend_pid() as pid`;
      if (!row.locked) {
        await this.#close();
        return false;
      }
      this.#lost = new AbortController();
      this.#pid = row.pid;
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
      try {
        await this.#sql`select pg_advisory_unlock(hashtextextended(${this.#key}, 0))`;
      } catch {
        // The session is going away anyway, and the lock goes with it.
      }
    }
    this.#pid = undefined;
    await this.#close();
  }

  // postgres.js reconnects transparently, so "a query worked" is not proof: the lock belongs to
  // the session, and a different backend pid means a different session that does not hold it.
  async #check(): Promise<void> {
    const sql = this.#sql;
    if (!sql || !this.held) return;
    try {
      const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
      if (row.pid !== this.#pid) this.#markLost("session replaced");
    } catch {
      this.#markLost("heartbeat failed");
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
