/**
 * Which database errors the runtime treats as transient, and what it does about them:
 * {@linkcode dbFault} classifies an error (retry or not, reopen the pool or not),
 * {@linkcode sessionGone} tells a dead session from one that survives its error,
 * {@linkcode faultDelayMs} spaces the retries, {@linkcode retryFaults} retries a fenced settling
 * write, and {@linkcode recyclePool} reopens a pool's connections.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Sql } from "./db.ts";
import type { Logger } from "./log.ts";

/** How the runtime treats a database error it may retry (see {@linkcode dbFault}). */
export interface DbFault {
  /** The SQLSTATE, postgres.js or socket code, e.g. `25006`, `CONNECTION_CLOSED`, `ECONNREFUSED`. */
  readonly code: string;
  /**
   * Whether the pool's connections should be reopened: a session that went read-only (SQLSTATE
   * 25006; a failover or `default_transaction_read_only` only reaches new sessions, so old ones
   * stay read-only after writes are allowed again). Not a connection error: the driver already
   * replaces a closed connection on the next query, and closing the pool on top of that, while
   * the server restarts, left it answering no query at all in a third of the runs of `deno task
   * chaos` "server restart mid-run" (the job stayed in flight at exit, code 3); 0 in 8 without.
   */
  readonly recycle: boolean;
}

// Retryable database faults, by code or SQLSTATE class (after graphile-worker's
// RETRYABLE_ERROR_CODES). Anything else is a bug or bad data, and is not retried by the runtime.
const FAULTS: ReadonlyArray<{ match: RegExp; recycle: boolean }> = [
  { match: /^08/, recycle: false }, // connection exception (the driver reconnects)
  { match: /^57P0[123]$/, recycle: false }, // admin/crash shutdown, cannot connect now
  { match: /^25006$/, recycle: true }, // read-only transaction
  { match: /^53300$/, recycle: false }, // too many connections
  { match: /^(40001|40P01)$/, recycle: false }, // serialization failure, deadlock
  {
    match:
      /^(CONNECTION_(CLOSED|DESTROYED|ENDED)|CONNECT_TIMEOUT|E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH|AI_AGAIN))$/,
    recycle: false,
  },
];

/**
 * Classify a database error as a transient fault (retry with backoff) or not.
 *
 * @param err anything thrown by a postgres.js query.
 * @returns the fault, or null when retrying cannot help (a bug, bad data, a permanent setting).
 * @example
 * const fault = dbFault(err);
 * if (fault?.recycle) await sql.close();
 */
export function dbFault(err: unknown): DbFault | null {
  const raw = (err as { code?: unknown } | null)?.code ??
    (err as { cause?: { code?: unknown } } | null)?.cause?.code;
  // Deno reports a refused TCP connect as ConnectionRefused, without a code.
  const code = typeof raw === "string"
    ? raw
    : err instanceof Deno.errors.ConnectionRefused
    ? "ECONNREFUSED"
    : err instanceof Deno.errors.ConnectionReset
    ? "ECONNRESET"
    : "";
  const fault = FAULTS.find((f) => f.match.test(code));
  return fault ? { code, recycle: fault.recycle } : null;
}

/**
 * Whether an error means the query's session is gone: its socket closed or is closing (a
 * connection exception, SQLSTATE class 08; the server ending the backend, 57P01/57P02; a socket
 * error), as opposed to an error the session survives (a deadlock, a cancel, a constraint).
 *
 * A reserved connection whose session is gone must not be released: postgres.js 3.4.9's
 * `release()` puts it back among the open connections even after it closed, and the pool's next
 * query on it never settles (porsager/postgres#1199; measured here: 1 run in 3 of the
 * lost-connection-mid-save test hung or failed on PostgreSQL 18). Left unreleased, the
 * connection is moved to the closed ones by the driver itself and reconnects on demand. It keeps
 * the dead session's last error, though, which the first request after the reconnect receives
 * ({@linkcode retryFaults}); when that request is a reservation, the connection is lost to the
 * pool until its `max_lifetime` (30–60 min; README "A reply lost after a commit").
 *
 * @param err anything thrown by a postgres.js query.
 * @returns true when the session that ran the query cannot run another.
 */
export function sessionGone(err: unknown): boolean {
  const code = dbFault(err)?.code ?? "";
  if (/^(08|57P0[12]$|CONNECTION_|E(CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH)$)/.test(code)) {
    return true;
  }
  // Deno's node:net words a write to a socket the server closed this way, without a code.
  return err instanceof Error &&
    err.message.includes("This socket has been ended by the other party");
}

/**
 * Retry delay in ms for the `n`th consecutive fault (1-based): 250 ms doubling, capped at `capMs`,
 * with ±20% jitter so instances that failed together do not retry together.
 */
export function faultDelayMs(n: number, capMs = 5000): number {
  const base = Math.min(capMs, 250 * 2 ** Math.max(0, n - 1));
  return Math.round(Math.min(capMs, base * (0.8 + Math.random() * 0.4)));
}

/**
 * Run a fenced settling write (a job's retry, failure or completion), trying again when the
 * database faults ({@linkcode dbFault}): `tries` tries in all, `faultDelayMs(n, 1000)` apart.
 *
 * Why a run's settle needs this: when a statement's session dies (a restart, a terminated
 * backend), postgres.js 3.4.9 keeps the server's last error on that connection object, and the
 * first query after it reconnects is rejected with that stale error (57P01 "terminating
 * connection …") although its new session is fine. The run's next write after a lost save is that
 * first query often enough (1 run in 3 of the lost-connection-mid-save test on PostgreSQL 18). A
 * run whose settle throws leaves its job `Processing` until the stale rule takes it.
 *
 * Only for writes that are safe to repeat: fenced on the claim (a repeat after a commit whose
 * reply was lost matches no row and changes nothing) and in a transaction of their own.
 *
 * @param write the whole write; called again from scratch after a fault.
 * @param log where each retried fault is reported (warn).
 * @param tries at least 1; default 3 (about 0.75 s of delays in all).
 * @returns what `write` returned.
 * @throws the last fault, or at once any error that is not a fault.
 * @example
 * await retryFaults(() => transaction(sql, log, (tx) => …), log);
 */
export async function retryFaults<T>(
  write: () => Promise<T>,
  log: Logger,
  tries = 3,
): Promise<T> {
  for (let n = 1;; n++) {
    try {
      return await write();
    } catch (err) {
      const fault = dbFault(err);
      if (!fault || n >= tries) throw err;
      const delayMs = faultDelayMs(n, 1000);
      log.warn(
        { err: (err as Error).message, code: fault.code, attempt: n, delayMs },
        "write faulted; retrying",
      );
      await sleep(delayMs);
    }
  }
}

/**
 * Reopen a pool's connections: each closes once its current query is done, and the pool opens
 * fresh ones on demand (a session that went read-only, or a socket to a server that restarted,
 * is not reused). postgres.js 3.4.9 has `close()` at runtime but not in its
 * types. Never throws, and never waits for the connections to end.
 *
 * Not waiting is the point: `close()` resolves only once every connection has ended, and one
 * still connecting to a server that is restarting ends only at its connect timeout, or later
 * (`deno task chaos`, "server restart mid-run": a give-back that awaited it stalled for 30 s
 * and the job was left in flight at exit). The close takes effect when called; new queries get
 * fresh connections meanwhile.
 *
 * @returns at once.
 * @example
 * if (dbFault(err)?.recycle) await recyclePool(sql);
 */
export function recyclePool(sql: Sql): Promise<void> {
  (sql as unknown as { close(): Promise<void> }).close().catch(() => {});
  return Promise.resolve();
}
