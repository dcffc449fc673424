/**
 * Queues spread over instances (`QUEUES`): two and three real main.ts processes on one database.
 * A queue is consumed (locked, claimed, recovered, repaired, pruned) only where it is listed; a
 * queue listed on two instances has one holder and one standby, which takes over when the holder
 * stops; every instance serves the whole API; `/readyz` says which instance answers, what it
 * consumes and counts a queue not consumed there as fine.
 */
import assert from "node:assert/strict";
import { ConfigError } from "../../lib/config.ts";
import { lockHolders } from "../../lib/lock.ts";
import { consumedQueues, type QueueSetup } from "../../lib/queue_setup.ts";
import { dbTest, waitFor, within } from "../_db.ts";
import { spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";

const IN_PROCESS = ["ingestion", "user_ingestion", "enrichment", "ssg"];
const SETUPS = (await Promise.all([
  import("../../queues/ingestion/setup.ts"),
  import("../../queues/user_ingestion/setup.ts"),
  import("../../queues/enrichment/setup.ts"),
  import("../../queues/ssg/setup.ts"),
  import("../../queues/auto_publish/setup.ts"),
  import("../../queues/seo_backfill/setup.ts"),
])).map((m) => m.queue as QueueSetup);

Deno.test("consumedQueues(): any subset of the in-process queues, in any order and spacing; unset is all", () => {
  assert.deepEqual(consumedQueues({}, SETUPS), IN_PROCESS);
  assert.deepEqual(consumedQueues({ QUEUES: " " }, SETUPS), IN_PROCESS);
  for (let i = 0; i < 200; i++) {
    const subset = IN_PROCESS.filter(() => Math.random() < 0.5);
    if (subset.length === 0) continue;
    const shuffled = [...subset, ...subset.filter(() => Math.random() < 0.3)]
      .sort(() => Math.random() - 0.5);
    const raw = shuffled.map((n) => `${" ".repeat(Math.floor(Math.random() * 2))}${n}`).join(",");
    assert.deepEqual(consumedQueues({ QUEUES: raw }, SETUPS), subset, raw);
  }
});

Deno.test("consumedQueues(): an unknown, host-polled or empty name stops startup naming QUEUES", () => {
  for (
    const [raw, why] of [
      ["ingestion,nope", '"nope" is not a queue'],
      ["Ingestion", '"Ingestion" is not a queue'],
      ["ssg,auto_publish", '"auto_publish" is host-polled'],
      ["seo_backfill", '"seo_backfill" is host-polled'],
      ["ingestion,,ssg", "an empty entry"],
    ]
  ) {
    assert.throws(() => consumedQueues({ QUEUES: raw }, SETUPS), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.ok(err.message.startsWith("Cannot parse QUEUES: "), err.message);
      assert.ok(err.message.includes(why), `${err.message} should say ${why}`);
      return true;
    });
  }
});

async function readyz(base: string) {
  const res = await fetch(`${base}/readyz`);
  return { ...(await res.json()), code: res.status };
}

dbTest(
  "QUEUES: a queue runs only where it is listed, one holder and one standby where listed twice; every instance serves the whole API",
  async (db) => {
    const root = await Deno.makeTempDir({ prefix: "textstack-split-" });
    const storage = `${root}/storage`;
    await Deno.mkdir(storage, { recursive: true });
    await Deno.writeTextFile(`${storage}/b.txt`, "Split\nby Q\n\nCHAPTER I\n\nOne.\n");
    const workers: WorkerProcess[] = [];
    const spawn = (queues: string, name: string) => {
      const w = spawnWorker(db, {
        QUEUES: queues,
        DATA_DIR: `${root}/${name}`,
        STORAGE_DIR: storage,
        SITE_DIR: `${root}/site`,
        POLL_INTERVAL_MS: "500",
      });
      workers.push(w);
      return w;
    };
    const base = async (w: WorkerProcess) =>
      `http://127.0.0.1:${(await w.waitForLog("http listening", {}, 60_000)).port}`;
    try {
      // B consumes everything but ingestion.
      const b = spawn("ssg, user_ingestion,enrichment", "b");
      const bBase = await base(b);
      for (const queue of ["ssg", "user_ingestion", "enrichment"]) {
        await b.waitForLog("consumer started", { queue }, 30_000);
      }
      // An ingestion job and an orphan of a dead boot: nobody here may touch them.
      const [job] = await db.sql<{ id: string }[]>`
        insert into ingestion_jobs (source_path) values ('b.txt') returning id`;
      const [orphan] = await db.sql<{ id: string }[]>`
        insert into ingestion_jobs (source_path, status, attempt_count, claimed_by, claimed_at)
        values ('b.txt', 'Processing', 1, ${crypto.randomUUID()}, now() - interval '1 day')
        returning id`;
      await waitFor("B ready", async () => (await readyz(bBase)).code === 200, 15_000, 100)
        .catch(async (err) => {
          throw new Error(`${err.message}: ${JSON.stringify(await readyz(bBase))}`);
        });
      const bReady = await readyz(bBase);
      assert.deepEqual(bReady.checks.queues, {
        ingestion: "not consumed here",
        user_ingestion: "holding",
        enrichment: "holding",
        ssg: "holding",
      });
      assert.deepEqual(bReady.instance.consumes, ["user_ingestion", "enrichment", "ssg"]);
      assert.equal(typeof bReady.instance.bootId, "string");
      assert.equal(typeof bReady.instance.pid, "number");
      assert.equal(typeof bReady.instance.host, "string");
      // Several poll ticks (500 ms): the queue B does not consume is not claimed, recovered or
      // locked there.
      await new Promise((r) => setTimeout(r, 1500));
      const rows = await db.sql<{ id: string; status: string }[]>`
        select id, status from ingestion_jobs order by id`;
      assert.deepEqual(rows.map((r) => r.status), ["Queued", "Processing"]);
      assert.equal((await lockHolders(db.sql, db.schema, ["ingestion"])).size, 0);
      assert.ok(!b.logs.some((l) => l.queue === "ingestion" && l.msg === "consumer started"));
      // B serves the whole API, the routes of the queue it does not consume and the host-polled
      // queues' claim routes included.
      const auth = { authorization: `Bearer ${TEST_TOKEN}` };
      const got = await fetch(`${bBase}/internal/ingestion/jobs/${job.id}`, { headers: auth });
      assert.equal(got.status, 200, await got.clone().text());
      assert.equal((await got.json()).status, "Queued");
      const seo = await fetch(`${bBase}/internal/seo/jobs/claim`, {
        method: "POST",
        headers: auth,
      });
      assert.equal(seo.status, 200, await seo.clone().text());
      assert.deepEqual(await seo.json(), { jobs: [] });

      // A consumes ingestion: it recovers the orphan and runs the job.
      const a = spawn("ingestion", "a");
      const aBase = await base(a);
      await a.waitForLog("consumer started", { queue: "ingestion" }, 30_000);
      await a.waitForLog("orphan recovered (its consumer is gone)", { id: orphan.id }, 15_000);
      await a.waitForLog("job completed", { id: job.id }, 15_000);
      await waitFor("A ready", async () => (await readyz(aBase)).code === 200, 15_000, 100);
      const aReady = await readyz(aBase);
      assert.deepEqual(aReady.checks.queues, {
        ingestion: "holding",
        user_ingestion: "not consumed here",
        enrichment: "not consumed here",
        ssg: "not consumed here",
      });
      assert.notEqual(aReady.instance.bootId, bReady.instance.bootId);
      assert.ok(!a.logs.some((l) => l.msg === "consumer started" && l.queue !== "ingestion"));
      // A site rebuild asked of A runs on B.
      const rebuild = await fetch(`${aBase}/internal/ssg/rebuild-all`, {
        method: "POST",
        headers: auth,
      });
      const ssgJob = await rebuild.json();
      await b.waitForLog("job claimed", { queue: "ssg", id: String(ssgJob.id) }, 15_000);
      await waitFor(
        "the rebuild",
        async () => {
          const [row] = await db.sql<{ status: string }[]>`
          select status from ssg_rebuild_jobs where id = ${ssgJob.id}`;
          return row.status === "Completed";
        },
        15_000,
        100,
      );
      assert.ok(!a.logs.some((l) => l.msg === "job claimed" && l.queue === "ssg"));

      // A second instance listing ingestion stands by, and takes over when A stops.
      const a2 = spawn("ingestion", "a2");
      const a2Base = await base(a2);
      await a2.waitForLog("another consumer holds the queue; standing by", {}, 30_000);
      await waitFor("A2 ready", async () => (await readyz(a2Base)).code === 200, 15_000, 100);
      assert.equal((await readyz(a2Base)).checks.queues.ingestion, "standing-by");
      a.child.kill("SIGTERM");
      assert.equal((await within("A to exit", a.exited)).code, 0);
      await a2.waitForLog("consumer started", { queue: "ingestion" }, 15_000);
      const [next] = await db.sql<{ id: string }[]>`
        insert into ingestion_jobs (source_path) values ('b.txt') returning id`;
      await a2.waitForLog("job completed", { id: next.id }, 15_000);
    } finally {
      for (const w of workers) {
        try {
          w.child.kill("SIGTERM");
        } catch { /* exited */ }
      }
      for (const w of workers) await within("a worker to exit", w.exited);
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  },
);

Deno.test("main.ts: a QUEUES or DATABASE_URL it cannot use exits 2 naming the setting, never printing the password", async () => {
  const root = await Deno.makeTempDir({ prefix: "textstack-badenv-" });
  try {
    for (
      const [env, setting] of [
        [{ QUEUES: "ingestion,auto_publish" }, "QUEUES"],
        [{ QUEUES: "nope" }, "QUEUES"],
        [{ DATABASE_URL: "postgres://u:s3cr3t-pw@h1:5432,h2:99999/db" }, "DATABASE_URL"],
        [
          { DATABASE_URL: "postgres://u:s3cr3t-pw@h/db?target_session_attrs=standby" },
          "DATABASE_URL",
        ],
      ] as const
    ) {
      const w = spawnWorker(null, {
        DATABASE_URL: "postgres://u:s3cr3t-pw@127.0.0.1:1/db",
        DATA_DIR: root,
        ...env,
      });
      const status = await within("the worker to exit", w.exited);
      assert.equal(status.code, 2, JSON.stringify(w.logs));
      const fatal = w.logs.find((l) => l.msg === "invalid configuration");
      assert.ok(String(fatal?.err).startsWith(`Cannot parse ${setting}: `), JSON.stringify(fatal));
      assert.ok(!JSON.stringify(w.logs).includes("s3cr3t-pw"), "the password is printed");
    }
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
