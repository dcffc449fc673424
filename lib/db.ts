/**
 * Database access: the connection pool, the dedicated connections that listeners and queue locks
 * need, and {@linkcode transaction}, the one way to run a transaction whose effects (events,
 * file writes) must only happen once it has committed (ADR-052: post-commit enqueue).
 *
 * @module
 */
import postgres from "postgres";
import type { Logger } from "./log.ts";

/** A postgres.js client (pool or dedicated connection). */
export type Sql = postgres.Sql;
/** A postgres.js client bound to one open transaction. */
export type TxSql = postgres.TransactionSql;

/** Options for {@linkcode connect}. */
export interface ConnectOptions {
  /** Schema put first on every connection's `search_path`. */
  schema: string;
  /** Shown in `pg_stat_activity.application_name`, e.g. `textstack-listener`. */
  applicationName: string;
  /** Pool size (default 10). */
  max?: number;
  /** Called with the connection id whenever one of this client's connections closes. */
  onclose?: (connId: number) => void;
}

/**
 * Reconnect delay in seconds for attempt `n`: 0.1 s doubling, capped at 2 s, so a listener or lock
 * connection is back within 2 s of the server returning (postgres.js's default grows to 20 s).
 */
export function cappedBackoff(attempt: number): number {
  return Math.min(2, 0.1 * 2 ** attempt);
}

/**
 * Open a postgres.js client.
 *
 * @param url `postgres://` connection URL.
 * @param options schema, application name, pool size and close hook.
 * @returns a lazily connecting client; bigint ids arrive as strings.
 * @example
 * const sql = connect(url, { schema: "public", applicationName: "textstack" });
 * await sql`select 1`;
 */
export function connect(url: string, options: ConnectOptions): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    backoff: cappedBackoff,
    onnotice: () => {},
    connect_timeout: 10,
    onclose: options.onclose,
    connection: {
      application_name: options.applicationName,
      search_path: `"${options.schema}"`,
    },
  });
}

/** What a transaction body receives from {@linkcode transaction}. */
export interface Tx {
  /** Queries bound to this transaction. */
  readonly sql: TxSql;
  /**
   * Register an effect to run after COMMIT succeeds; it is discarded on rollback. Effects run in
   * registration order; one that throws is logged and does not stop the others.
   */
  afterCommit(effect: () => void | Promise<void>): void;
}

/**
 * Run `body` in one transaction and, only once it has committed, its `afterCommit` effects.
 *
 * With a `signal`, an abort cancels the statement the transaction is running
 * (`pg_cancel_backend`), and a body that finishes after the abort is rolled back instead of
 * committed: a shutdown never waits on a long save, and never half-commits one.
 *
 * @param sql the pool.
 * @param log where failing effects are reported.
 * @param body the transaction; throw to roll back (its effects are then discarded).
 * @param signal optional; aborting it rolls the transaction back (rejecting with the reason).
 * @returns what `body` returned, after every effect has run.
 * @throws whatever `body` or COMMIT threw, or `signal.reason`; effects never throw to the caller.
 * @example
 * await transaction(sql, log, async (tx) => {
 *   await tx.sql`update jobs set status = 'Completed' where id = ${id}`;
 *   tx.afterCommit(() => events.publish({ id, status: "Completed" }));
 * });
 */
export async function transaction<T>(
  sql: Sql,
  log: Logger,
  body: (tx: Tx) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  signal?.throwIfAborted();
  const effects: Array<() => void | Promise<void>> = [];
  let result: T;
  try {
    result = await sql.begin(async (txSql) => {
      let cancelling: Promise<unknown> | undefined;
      const cancel = (pid: number) => () => {
        cancelling = sql`select pg_cancel_backend(${pid})`.catch(() => {});
      };
      let onAbort: (() => void) | undefined;
      try {
        if (signal) {
          const [{ pid }] = await txSql<{ pid: number }[]>`select pg_backend_pid() as pid`;
          onAbort = cancel(pid);
          signal.addEventListener("abort", onAbort, { once: true });
          // An abort during BEGIN or the pid query fired no listener: do not start the body.
          signal.throwIfAborted();
        }
        const value = await body({
          sql: txSql,
          afterCommit: (effect) => void effects.push(effect),
        });
        // An abort that came between statements must still roll the work back.
        signal?.throwIfAborted();
        return value;
      } finally {
        if (onAbort) signal?.removeEventListener("abort", onAbort);
        // The cancel must land while this transaction still owns the backend: once it ends, the
        // pooled connection may run someone else's statement, which a late cancel would kill.
        await cancelling;
      }
    }) as T;
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw err;
  }
  for (const effect of effects) {
    try {
      await effect();
    } catch (err) {
      log.error({ err }, "after-commit effect failed");
    }
  }
  return result;
}

/**
 * Keep the process alive through postgres.js 3.4.9's known crash when a connection closes under a
 * pending small write: `nextWrite` runs from `setImmediate` after `closed()` has nulled the socket
 * and throws `TypeError: Cannot read properties of null (reading 'write')`, uncatchable by the
 * caller (porsager/postgres#1154, #1208; fixes #1168, #1176, #1209 not yet released). By then the
 * query has already been rejected with CONNECTION_CLOSED, so dropping the write is safe; the
 * error is logged. Any other uncaught error still ends the process. Seen here in a test that
 * terminates a backend mid-statement.
 *
 * @param log where each swallowed occurrence is reported.
 * @example
 * guardDriverCloseCrash(log); // once, at startup (main.ts, tests/_db.ts)
 */
export function guardDriverCloseCrash(log: Logger): void {
  globalThis.addEventListener("error", (event) => {
    const err = event.error;
    if (
      err instanceof TypeError && err.message.includes("(reading 'write')") &&
      /postgres\/src\/connection\.js/.test(err.stack ?? "")
    ) {
      event.preventDefault();
      log.error(
        { err },
        "postgres.js wrote to a closed connection; ignored (porsager/postgres#1154)",
      );
    }
  });
}
