/**
 * Database access: the connection pool, the dedicated connections that listeners and queue locks
 * need, and {@linkcode transaction}, the one way to run a transaction whose effects (events,
 * file writes) must only happen once it has committed (ADR-052: post-commit enqueue). Which of
 * its errors are transient, and how they are retried, is lib/db_fault.ts.
 *
 * @module
 */
import postgres from "postgres";
import { driverOptions } from "./database_url.ts";
import type { Logger } from "./log.ts";
import { sessionGone } from "./db_fault.ts";

/** A postgres.js client (pool or dedicated connection). */
export type Sql = postgres.Sql;
/** A postgres.js SQL fragment, to interpolate into another statement (e.g. the lock's claim fence). */
export type Fragment = postgres.PendingQuery<postgres.Row[]>;
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
  /** Called with each NOTIFY's channel and payload (a listener connection's own LISTENs). */
  onnotify?: (channel: string, payload: string) => void;
  /** A connection that never idles out or retires (a listener's, a lock's). */
  dedicated?: boolean;
}

/**
 * Open a postgres.js client on a `DATABASE_URL`, read the way libpq reads it (host lists, local
 * sockets; lib/database_url.ts), with `options` on top. Every client of the worker is opened
 * here, so all of them follow the same target rule (`target_session_attrs=primary` for a host
 * list).
 *
 * @throws {DatabaseUrlError} for a URL the worker cannot use (lib/config.ts refuses it first).
 */
export function openClient(url: string, options: postgres.Options<Record<string, never>>): Sql {
  const target = driverOptions(url);
  // postgres.js takes a host and port list (arrays) at runtime, though its types say one string.
  return postgres(target.url, {
    ...(target.options as unknown as postgres.Options<Record<string, never>>),
    ...options,
  });
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
 * @param url `postgres://` connection URL (a host list or a local socket too; see {@linkcode
 *   openClient}).
 * @param options schema, application name, pool size and close hook.
 * @returns a lazily connecting client; bigint ids arrive as strings.
 * @example
 * const sql = connect(url, { schema: "public", applicationName: "textstack" });
 * await sql`select 1`;
 */
export function connect(url: string, options: ConnectOptions): Sql {
  return openClient(url, {
    max: options.max ?? 10,
    backoff: cappedBackoff,
    onnotice: () => {},
    connect_timeout: 10,
    onclose: options.onclose,
    ...(options.onnotify ? { onnotify: options.onnotify } : {}),
    ...(options.dedicated ? { idle_timeout: 0, max_lifetime: null, fetch_types: false } : {}),
    connection: {
      application_name: options.applicationName,
      search_path: `"${options.schema}"`,
    },
  });
}

/** Thrown when a listener or lock session lands on a server in recovery (a standby): retried. */
export class InRecoveryError extends Error {
  override name = "InRecoveryError";
  /** Retried like a connection fault (lib/db_fault.ts dbFault: class 57P03, "cannot connect now"). */
  readonly code = "57P03";
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
 * committed: a shutdown never waits on a long save, and never half-commits one. The backend's pid
 * comes from the statements the body has sent (postgres.js stamps each with its connection's
 * `{ pid, secret }`), so a transaction costs no extra round trip for it (it used to ask
 * `select pg_backend_pid()` after every BEGIN).
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
      // The statements the body created; once one has been sent, its `state` names the backend.
      const sent: Array<{ state?: { pid?: number | null } }> = [];
      const onAbort = () => {
        const pid = sent.find((q) => q.state?.pid)?.state?.pid;
        // None sent yet: nothing runs to cancel, and the check after the body rolls back.
        if (pid) cancelling = sql`select pg_cancel_backend(${pid})`.catch(() => {});
      };
      try {
        if (signal) {
          signal.addEventListener("abort", onAbort, { once: true });
          // An abort during BEGIN fired before the listener: do not start the body.
          signal.throwIfAborted();
        }
        const value = await body({
          sql: signal ? recordSent(txSql, sent) : txSql,
          afterCommit: (effect) => void effects.push(effect),
        });
        // An abort that came between statements must still roll the work back.
        signal?.throwIfAborted();
        return value;
      } finally {
        signal?.removeEventListener("abort", onAbort);
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
 * Run one statement on a pooled connection reserved for it, cancelling it when `signal` aborts:
 * what {@linkcode transaction} does for a transaction, for a statement that is a transaction of
 * its own (no BEGIN, no COMMIT: one round trip, one commit). The cancel is awaited
 * before the connection goes back to the pool, so it never reaches the connection's next user; a
 * connection whose session died under the statement does not go back at all
 * ({@linkcode sessionGone}).
 *
 * @param sql the pool.
 * @param build makes the statement on the reserved connection (postgres.js sends it when awaited).
 * @param signal optional; aborting it while the statement runs cancels it and rolls it back. A
 *   statement that had already finished stays committed (there is nothing left to roll back).
 * @returns the statement's rows.
 * @throws the database error, or `signal.reason` when the abort came first.
 * @example
 * const rows = await runCancellable(sql, (c) => c`update jobs set … returning id`, signal);
 */
export async function runCancellable<T>(
  sql: Sql,
  build: (sql: Sql) => Promise<T> & { cancel(): unknown },
  signal?: AbortSignal,
): Promise<T> {
  signal?.throwIfAborted();
  const reserved = await sql.reserve();
  let cancelling: Promise<unknown> | undefined;
  // A connection whose session died under the statement is not given back (sessionGone says why).
  let gone = false;
  try {
    signal?.throwIfAborted();
    const query = build(reserved);
    const onAbort = () => {
      cancelling = Promise.resolve(query.cancel()).catch(() => {});
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      return await query;
    } catch (err) {
      gone = sessionGone(err);
      throw signal?.aborted ? signal.reason : err;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      await cancelling;
    }
  } finally {
    if (!gone) reserved.release();
  }
}

// The same transaction client, recording every query it creates (fragments too: they are never
// sent, so they never get a `state`). Property reads (json, array, unsafe …) pass through.
function recordSent(txSql: TxSql, sent: Array<{ state?: { pid?: number | null } }>): TxSql {
  return new Proxy(txSql, {
    apply(target, thisArg, args) {
      const query = Reflect.apply(target, thisArg, args);
      if (query && typeof query === "object" && "cancel" in query) sent.push(query);
      return query;
    },
  });
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
  // The same write, a second variant (seen by `deno task chaos` when a server restart closes the
  // socket half-way): Deno's node:net throws "This socket has been ended by the other party" from
  // the same `nextWrite`, surfacing as an error event or an unhandled rejection.
  const isDriverCloseCrash = (err: unknown) =>
    err instanceof Error &&
    ((err instanceof TypeError && err.message.includes("(reading 'write')")) ||
      err.message.includes("This socket has been ended by the other party")) &&
    /postgres\/src\/connection\.js/.test(err.stack ?? "");
  const swallow = (err: unknown, event: Event) => {
    if (!isDriverCloseCrash(err)) return;
    event.preventDefault();
    log.error(
      { err },
      "postgres.js wrote to a closed connection; ignored (porsager/postgres#1154)",
    );
  };
  globalThis.addEventListener("error", (event) => swallow(event.error, event));
  globalThis.addEventListener("unhandledrejection", (event) => swallow(event.reason, event));
}

// The HTTP layer classifies its errors with dbFault imported from here.
export { dbFault } from "./db_fault.ts";
