/**
 * The worker behind a real PgBouncer (Debian's `pgbouncer`, installed by .ci/run): in
 * `pool_mode = transaction` LISTEN and session advisory locks do not work, and the worker must
 * say so at start and stay unready ("detect that case at start"); in
 * `pool_mode = session` — the control that proves the check can pass — it is ready as on a direct
 * connection.
 *
 * PgBouncer refuses to run as root; as root the test runs it as the `postgres` OS user (`-u`).
 */
import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor, within } from "../_db.ts";
import { freePort } from "../_fs.ts";
import { spawnWorker, type WorkerProcess } from "../_worker.ts";
import { listening } from "../_host.ts";

/** These tests need pgbouncer (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["pgbouncer"] } as const;

const PROBE_WARNING =
  "notifications are not delivered at start: the worker needs a direct connection (LISTEN does not work through a transaction-mode pooler); running on polling";
const LOCK_WARNING =
  "lock session changed backend: is a transaction-mode pooler in the way? The worker needs a direct connection";

interface Bouncer {
  /** `postgres://` URL of the test database through PgBouncer. */
  url: string;
  stop(): Promise<void>;
}

/**
 * Start PgBouncer on a free port in front of the test server, in `mode`. The client's
 * `search_path` startup parameter is ignored (PgBouncer 1.18 refuses it otherwise), so each
 * server connection sets the test schema with `connect_query`.
 */
async function startBouncer(db: TestDb, mode: "transaction" | "session"): Promise<Bouncer> {
  const which = await new Deno.Command("sh", { args: ["-c", "command -v pgbouncer"] }).output();
  assert.ok(which.success, "pgbouncer is not installed: apt-get install pgbouncer (.ci/run does)");
  const upstream = new URL(db.url);
  const port = freePort();
  const dir = await Deno.makeTempDir({ prefix: "textstack-pgbouncer-" });
  await Deno.chmod(dir, 0o755);
  const target = [
    `host=${upstream.hostname}`,
    `port=${upstream.port || 5432}`,
    `dbname=${decodeURIComponent(upstream.pathname.slice(1))}`,
    `user=${decodeURIComponent(upstream.username)}`,
    ...(upstream.password ? [`password=${decodeURIComponent(upstream.password)}`] : []),
    `connect_query='SET search_path TO ${db.schema}'`,
  ].join(" ");
  await Deno.writeTextFile(
    `${dir}/pgbouncer.ini`,
    [
      "[databases]",
      `bounced = ${target}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = any",
      `pool_mode = ${mode}`,
      "ignore_startup_parameters = search_path",
      "max_client_conn = 100",
      "default_pool_size = 20",
      "",
    ].join("\n"),
  );
  await Deno.chmod(`${dir}/pgbouncer.ini`, 0o644);
  const asRoot = Deno.uid() === 0;
  const child = new Deno.Command("pgbouncer", {
    args: [...(asRoot ? ["-u", "postgres"] : []), `${dir}/pgbouncer.ini`],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const log: string[] = [];
  const pump = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) log.push(chunk);
  })();
  await waitFor(
    `pgbouncer listening: ${log.join("")}`,
    () => log.join("").includes("listening on"),
  );
  return {
    url: `postgres://${upstream.username || "postgres"}@127.0.0.1:${port}/bounced`,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await pump;
    },
  };
}

async function readyz(base: string): Promise<{ status: number; checks: Record<string, unknown> }> {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, checks: (await res.json()).checks };
}

async function stopWorker(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  await within("the worker to exit", worker.exited, 30_000);
}

dbTest(
  "main.ts behind a transaction-mode PgBouncer warns that it needs a direct connection and stays unready",
  async (db) => {
    const bouncer = await startBouncer(db, "transaction");
    const worker = spawnWorker(db, { DATABASE_URL: bouncer.url, LISTENER_PROBE_MS: "1000" });
    try {
      const base = await listening(worker);
      await worker.waitForLog(PROBE_WARNING, {}, 30_000);
      // The lock sessions: some heartbeat lands on another server connection (the pooler hands
      // out whichever is free), which the lock reports.
      await worker.waitForLog(LOCK_WARNING, {}, 30_000);
      // Unready for as long as it runs behind the pooler, never 200 in between.
      for (let i = 0; i < 5; i++) {
        const { status, checks } = await readyz(base);
        assert.equal(status, 503, JSON.stringify(checks));
        assert.notEqual(checks.listener, "live", JSON.stringify(checks));
        assert.equal(checks.pooler, "suspected: the worker needs a direct connection");
        await new Promise((r) => setTimeout(r, 300));
      }
    } finally {
      await stopWorker(worker);
      await bouncer.stop();
    }
  },
  REQUIRES,
);

dbTest(
  "main.ts behind a session-mode PgBouncer is ready and warns of nothing (the control)",
  async (db) => {
    const bouncer = await startBouncer(db, "session");
    const worker = spawnWorker(db, { DATABASE_URL: bouncer.url, LISTENER_PROBE_MS: "1000" });
    try {
      const base = await listening(worker);
      await waitFor("ready", async () => (await readyz(base)).status === 200, 15_000, 100);
      // A few probes and heartbeats later, still ready and nothing suspected.
      await new Promise((r) => setTimeout(r, 2500));
      const { status, checks } = await readyz(base);
      assert.equal(status, 200, JSON.stringify(checks));
      assert.deepEqual([checks.listener, checks.pooler], ["live", "none"]);
      const warned = worker.logs.filter((l) => l.msg === PROBE_WARNING || l.msg === LOCK_WARNING);
      assert.deepEqual(warned, []);
    } finally {
      await stopWorker(worker);
      await bouncer.stop();
    }
  },
  REQUIRES,
);
