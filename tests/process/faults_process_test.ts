/**
 * Faults, the whole process: a read-only database at boot, an exit code that tells whether every
 * job was given back, readiness within 5 s of a normal start, and stderr that carries only JSON.
 */
import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { insertJob, jobRow, SMALL_BOOK } from "../_ingestion.ts";
import { spawnWorker, TEST_TOKEN } from "../_worker.ts";
import { mkfifo } from "../_fs.ts";
import { IN_FLIGHT_EXIT_CODE } from "../../lib/lifecycle.ts";

// A login role on the test server limited by `settings`; returns its URL and a drop function.
async function role(db: TestDb, settings: (name: string) => Promise<unknown>) {
  const name = `t_role_${crypto.randomUUID().slice(0, 8)}`;
  await db.sql`create role ${db.sql(name)} login password 'pw'`;
  await db.sql`grant all on schema ${db.sql(db.schema)} to ${db.sql(name)}`;
  await db.sql`grant all on all tables in schema ${db.sql(db.schema)} to ${db.sql(name)}`;
  await settings(name);
  const url = new URL(db.url);
  url.username = name;
  url.password = "pw";
  return {
    name,
    url: url.toString(),
    async drop() {
      await db.sql`select pg_terminate_backend(pid) from pg_stat_activity where usename = ${name}`;
      await db.sql`drop owned by ${db.sql(name)}`;
      await db.sql`drop role if exists ${db.sql(name)}`;
    },
  };
}

dbTest(
  "main.ts boots on a read-only database, backs off while writes fail, and runs jobs once writes are allowed",
  async (db) => {
    const ro = await role(
      db,
      (name) => db.sql`alter role ${db.sql(name)} set default_transaction_read_only = on`,
    );
    const dir = await Deno.makeTempDir();
    await Deno.writeTextFile(`${dir}/book.txt`, SMALL_BOOK);
    const id = await insertJob(db, "book.txt");
    const worker = spawnWorker(db, { DATABASE_URL: ro.url, STORAGE_DIR: dir, LOG_LEVEL: "info" });
    try {
      await worker.waitForLog("consumer started");
      await worker.waitForLog("orphan recovery failed; retrying", {
        queue: "ingestion",
        code: "25006",
        attempt: 3,
      });
      // Every queue backs off on its own; follow ingestion's lines.
      const lines = worker.logs.filter((l) =>
        l.queue === "ingestion" && String(l.msg).endsWith("failed; retrying")
      );
      const delays = lines.map((l) => l.delayMs as number);
      assert.ok(delays[2] > delays[0], `backoff grows: ${delays}`);
      assert.ok(lines.every((l) => !("stack" in l) && typeof l.err === "string"), "one line each");
      await db.sql`alter role ${db.sql(ro.name)} reset default_transaction_read_only`;
      // Only new sessions see the change: the recycled pool must reopen its connections.
      await waitFor(
        "the job completed",
        async () => (await jobRow(db, id)).status === "Completed",
        30_000,
        100,
      );
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
    } finally {
      try {
        worker.child.kill("SIGKILL");
      } catch {
        // already exited
      }
      await worker.exited;
      await ro.drop();
    }
  },
);

dbTest(
  "main.ts exits 3 and names the job when its give-back cannot commit within the budget",
  async (db) => {
    const dir = await Deno.makeTempDir();
    await mkfifo(`${dir}/stream.txt`);
    const worker = spawnWorker(db, { STORAGE_DIR: dir, SHUTDOWN_BUDGET_MS: "1500" });
    await worker.waitForLog("consumer started");
    const id = await insertJob(db, "stream.txt");
    await worker.waitForLog("job claimed", { id });
    // Another session holds the job's row: the give-back waits on it past the budget.
    const release = Promise.withResolvers<void>();
    const locked = Promise.withResolvers<void>();
    const holding = db.sql.begin(async (tx) => {
      await tx`select id from ingestion_jobs where id = ${id} for update`;
      locked.resolve();
      await release.promise;
    });
    await locked.promise;
    try {
      worker.child.kill("SIGTERM");
      const status = await worker.exited;
      assert.equal(status.code, IN_FLIGHT_EXIT_CODE);
      const line = worker.logs.find((l) =>
        l.msg === "jobs left in flight: their give-back did not commit"
      );
      assert.deepEqual(line?.ids, [id]);
    } finally {
      release.resolve();
      await holding;
    }
    assert.equal((await jobRow(db, id)).status, "Processing", "the exit code told the truth");
  },
);

dbTest(
  "main.ts: /readyz is 200 within 5 s of start, and stderr carries only JSON lines",
  async (db) => {
    const worker = spawnWorker(db, {});
    const base = await worker.baseUrl();
    const t0 = performance.now();
    await waitFor("ready", async () => (await fetch(`${base}/readyz`)).status === 200, 5000, 50);
    assert.ok(performance.now() - t0 < 5000);
    const body = await (await fetch(`${base}/readyz`)).json();
    assert.deepEqual(body.checks.queues, {
      ingestion: "holding",
      ssg: "holding",
      user_ingestion: "holding",
      enrichment: "holding",
    });
    // An event stream opened and closed, and a HEAD: nothing of it reaches stderr as plain text.
    const auth = { authorization: `Bearer ${TEST_TOKEN}` };
    const head = await fetch(`${base}/internal/events`, { method: "HEAD", headers: auth });
    assert.equal(head.status, 200);
    const abort = new AbortController();
    const stream = await fetch(`${base}/internal/events`, { headers: auth, signal: abort.signal });
    const reader = stream.body!.getReader();
    await reader.read();
    abort.abort();
    await reader.cancel().catch(() => {});
    await (await fetch(`${base}/healthz`)).body?.cancel();
    worker.child.kill("SIGTERM");
    assert.equal((await worker.exited).code, 0);
    const plain = worker.logs.filter((l) => String(l.msg).startsWith("stderr: "));
    assert.deepEqual(plain, []);
  },
);
