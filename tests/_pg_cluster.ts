/**
 * A PostgreSQL 15 primary and a synchronous streaming replica on this machine, for the failover
 * test and the chaos row: `initdb`, `pg_basebackup -R`, `pg_ctl` from /usr/lib/postgresql/15/bin,
 * run as the `postgres` user (`runuser -u postgres --` when this process is root), private data
 * directories under a temp directory, free ports on 127.0.0.1.
 *
 * Needs the Debian package `postgresql-15` (apt-get install postgresql-15).
 *
 * @module
 */
import { freePort } from "./_fs.ts";

/** Where the PostgreSQL 15 server binaries are. */
export const PG15_BIN = "/usr/lib/postgresql/15/bin";

/** Whether the PostgreSQL 15 binaries are installed. */
export function pg15Installed(): boolean {
  try {
    return Deno.statSync(`${PG15_BIN}/pg_ctl`).isFile &&
      Deno.statSync(`${PG15_BIN}/pg_basebackup`).isFile;
  } catch {
    return false;
  }
}

/** The pair, and what a failover test does to it. */
export interface PgCluster {
  readonly primaryPort: number;
  readonly replicaPort: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` for one server. */
  url(port: number): string;
  /** Both servers, primary first, as a host list with `target_session_attrs`. */
  hostList(attrs?: string): string;
  /** `pg_ctl stop -m immediate` on the primary (a crash: no shutdown checkpoint). */
  crashPrimary(): Promise<void>;
  /** `pg_ctl promote -w` on the replica. */
  promoteReplica(): Promise<void>;
  /** Stop whatever still runs and delete the data directories. */
  destroy(): Promise<void>;
}

async function run(cmd: string, args: string[], asPostgres: boolean): Promise<string> {
  const [bin, argv] = asPostgres && Deno.uid() === 0
    ? ["runuser", ["-u", "postgres", "--", cmd, ...args]]
    : [cmd, args];
  // From "/": the postgres user may not be allowed into this process's working directory.
  const out = await new Deno.Command(bin, { args: argv, stdin: "null", cwd: "/" }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(
      `${cmd} ${args.join(" ")} failed: ${stdout}${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return stdout;
}

/**
 * Build and start the pair; returns once the replica streams synchronously (a commit on the
 * primary is flushed on the replica before it returns, so a crash of the primary loses none).
 */
export async function startPgCluster(): Promise<PgCluster> {
  const root = await Deno.makeTempDir({ prefix: "textstack-pg15-" });
  const asPostgres = Deno.uid() === 0;
  if (asPostgres) await run("chown", ["postgres:postgres", root], false);
  const primary = `${root}/primary`;
  const replica = `${root}/replica`;
  const primaryPort = freePort();
  let replicaPort = freePort();
  while (replicaPort === primaryPort) replicaPort = freePort();
  const pg = (name: string, ...args: string[]) => run(`${PG15_BIN}/${name}`, args, asPostgres);
  await pg("initdb", "-D", primary, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync");
  await Deno.writeTextFile(
    `${primary}/postgresql.conf`,
    [
      `port = ${primaryPort}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${root}'`,
      "wal_level = replica",
      "max_wal_senders = 5",
      "hot_standby = on",
      "synchronous_standby_names = '*'",
      "synchronous_commit = on",
      "fsync = off",
      "max_connections = 100",
      "wal_sender_timeout = 5s",
      "wal_receiver_status_interval = 1s",
      "",
    ].join("\n"),
    { append: true },
  );
  const start = (dir: string, port: number) =>
    pg("pg_ctl", "-D", dir, "-l", `${dir}.log`, "-o", `-p ${port}`, "-w", "-t", "30", "start");
  const running = new Set<string>();
  const stop = async (dir: string, mode: string) => {
    if (!running.has(dir)) return;
    running.delete(dir);
    await pg("pg_ctl", "-D", dir, "-m", mode, "-w", "-t", "30", "stop").catch(() => {});
  };
  const destroy = async () => {
    await stop(replica, "immediate");
    await stop(primary, "immediate");
    await Deno.remove(root, { recursive: true }).catch(() => {});
  };
  try {
    await start(primary, primaryPort);
    running.add(primary);
    await pg(
      "pg_basebackup",
      "-h",
      "127.0.0.1",
      "-p",
      String(primaryPort),
      "-U",
      "postgres",
      "-D",
      replica,
      "-R",
      "-X",
      "stream",
      "--no-sync",
    );
    // The replica's copy of the configuration would make it wait, once promoted, for a
    // synchronous standby of its own that never comes: every commit would hang.
    await run(
      "sh",
      ["-c", `echo "synchronous_standby_names = ''" >> '${replica}/postgresql.auto.conf'`],
      asPostgres,
    );
    await start(replica, replicaPort);
    running.add(replica);
    // Synchronous once the primary says so.
    for (let i = 0;; i++) {
      const state = await pg(
        "psql",
        "-h",
        "127.0.0.1",
        "-p",
        String(primaryPort),
        "-U",
        "postgres",
        "-Atc",
        "select sync_state from pg_stat_replication",
      );
      if (state.trim() === "sync") break;
      if (i > 100) throw new Error(`the replica does not stream synchronously: ${state}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    await destroy();
    throw err;
  }
  const url = (port: number) => `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    primaryPort,
    replicaPort,
    url,
    hostList: (attrs = "read-write") =>
      `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${replicaPort}/postgres` +
      `?target_session_attrs=${attrs}`,
    crashPrimary: () => stop(primary, "immediate"),
    async promoteReplica() {
      await pg("pg_ctl", "-D", replica, "-w", "-t", "30", "promote");
    },
    destroy,
  };
}
