import assert from "node:assert/strict";
import { connect } from "../../../lib/db.ts";
import { transaction } from "../../../lib/db.ts";
import { Consumer } from "../../../lib/consumer.ts";
import { QueueLock } from "../../../lib/lock.ts";
import { Wake } from "../../../lib/wake.ts";
import { listenForWakes } from "../../../lib/listener.ts";
import * as ssg from "../../../queues/ssg/mod.ts";
import * as ssgJobs from "../../../queues/ssg/jobs.ts";
import { dbTest, type TestDb, waitFor } from "../../_db.ts";
import { insertEdition, ssgContext, ssgJob } from "../../_ssg.ts";

type Ctx = Awaited<ReturnType<typeof ssgContext>>;

/** Insert a row as a crashed or vanished worker left it: `Running`, claimed by `bootId`. */
async function insertRunning(db: TestDb, bootId: string): Promise<string> {
  const [row] = await db.sql<{ id: string }[]>`
    insert into ssg_rebuild_jobs (status, attempt_count, claimed_by, started_at)
    values ('Running', 1, ${bootId}, now()) returning id`;
  return row.id;
}

async function queuedCount(db: TestDb): Promise<number> {
  const [{ n }] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from ssg_rebuild_jobs where status = 'Queued'`;
  return n;
}

/** The ssg consumer the way main.ts starts it. */
async function startConsumer(db: TestDb, ctx: Ctx, runTimeoutMs = 60_000) {
  const wake = new Wake(ssg.name);
  const lock = new QueueLock({ url: db.url, schema: db.schema, queue: ssg.name, log: ctx.log });
  const listenerSql = connect(db.url, { schema: db.schema, applicationName: "test-l", max: 1 });
  await listenForWakes(listenerSql, `${db.schema}.${ssg.table}`, wake, ctx.log);
  const consumer = new Consumer({
    queue: ssg,
    ctx,
    lock,
    wake,
    pollIntervalMs: 30_000,
    standbyRetryMs: 100,
    runTimeoutMs,
  });
  consumer.start();
  return async () => {
    await consumer.stop(performance.now() + 2000);
    await listenerSql.end({ timeout: 1 });
  };
}

dbTest(
  "claim() takes the oldest Queued job: Running, started, attempt counted, claimed_by",
  async (db) => {
    const ctx = await ssgContext(db);
    const { job: queued } = await ssgJobs.enqueue(db.sql);
    const job = await ssg.claim(ctx);
    assert.deepEqual(job, { id: queued.id, attempt_count: 1, claimed_by: ctx.bootId });
    const row = await ssgJob(db, queued.id);
    assert.equal(row.status, "Running");
    assert.ok(row.started_at);
    assert.equal(await ssg.claim(ctx), null, "nothing else is queued");
  },
);

dbTest(
  "claim() publishes its claimed event with how long the job was runnable, in seconds",
  async (db) => {
    const ctx = await ssgContext(db);
    const { job: queued } = await ssgJobs.enqueue(db.sql);
    await db.sql`
      update ssg_rebuild_jobs set created_at = now() - interval '30 seconds',
        updated_at = now() - interval '30 seconds'
      where id = ${queued.id}`;
    const events: { transition: string; runnableForS?: number | null }[] = [];
    const stop = ctx.events.observe((e) => void events.push(e));
    await ssg.claim(ctx);
    stop();
    assert.deepEqual(events.map((e) => e.transition), ["claimed"]);
    const waited = events[0].runnableForS;
    assert.ok(typeof waited === "number" && waited >= 29 && waited < 120, `got ${waited}`);
  },
);

dbTest("claim() skips a Queued row another session holds", async (db) => {
  const ctx = await ssgContext(db);
  const { job } = await ssgJobs.enqueue(db.sql);
  const other = connect(db.url, { schema: db.schema, applicationName: "test-holder", max: 1 });
  try {
    await other.begin(async (tx) => {
      await tx`select id from ssg_rebuild_jobs where id = ${job.id} for update`;
      // A claim that waited for the lock would never return while this transaction holds it.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = new Promise((resolve) => timer = setTimeout(() => resolve("waited"), 3000));
      const claimed = ssg.claim(ctx);
      const first = await Promise.race([claimed, waited]).finally(() => clearTimeout(timer));
      assert.equal(first, null);
    });
  } finally {
    await other.end({ timeout: 1 });
  }
  assert.equal((await ssg.claim(ctx))?.id, job.id);
});

dbTest("recover() fails every Running row, at any age, with the ADR's error", async (db) => {
  const ctx = await ssgContext(db);
  const crashed = await insertRunning(db, crypto.randomUUID());
  const mine = await insertRunning(db, ctx.bootId);
  await db.sql`update ssg_rebuild_jobs set status = 'Completed' where id = ${mine}`;
  const { job: queued } = await ssgJobs.enqueue(db.sql);
  await ssg.recover(ctx, new AbortController().signal);
  const row = await ssgJob(db, crashed);
  assert.deepEqual([row.status, row.error, row.claimed_by], [
    "Failed",
    "interrupted (not owned by the running ssg-worker)",
    null,
  ]);
  assert.ok(row.finished_at);
  assert.equal((await ssgJob(db, mine)).status, "Completed");
  assert.equal((await ssgJob(db, queued.id)).status, "Queued");
});

dbTest(
  "recover() publishes one recovered event per row it failed: Failed, its attempt, the ADR's error",
  async (db) => {
    const ctx = await ssgContext(db);
    const crashed = await insertRunning(db, crypto.randomUUID());
    const events: unknown[][] = [];
    const stop = ctx.events.observe((e) =>
      void events.push([e.queue, e.id, e.transition, e.status, e.attempt, e.error])
    );
    await ssg.recover(ctx, new AbortController().signal);
    stop();
    assert.deepEqual(events, [[ssg.name, crashed, "recovered", "Failed", 1, ssg.INTERRUPTED]]);
  },
);

dbTest(
  "recoverOrphans() gives back this boot's Running rows and leaves others to recover()",
  async (db) => {
    const ctx = await ssgContext(db);
    const own = await insertRunning(db, ctx.bootId);
    const foreign = await insertRunning(db, crypto.randomUUID());
    await ssg.recoverOrphans(ctx, new AbortController().signal);
    const mine = await ssgJob(db, own);
    assert.deepEqual([mine.status, mine.attempt_count, mine.error, mine.claimed_by], [
      "Queued",
      0,
      null,
      null,
    ]);
    assert.equal((await ssgJob(db, foreign)).status, "Running");
    await ssg.recover(ctx, new AbortController().signal);
    assert.equal((await ssgJob(db, foreign)).status, "Failed");
    assert.equal((await ssgJob(db, own)).status, "Queued");
  },
);

dbTest("the consumer recovers before every claim, not only at startup", async (db) => {
  const ctx = await ssgContext(db);
  const stop = await startConsumer(db, ctx);
  try {
    const { job: first } = await ssgJobs.enqueue(db.sql);
    await waitFor(
      "the first rebuild",
      async () => (await ssgJob(db, first.id)).status === "Completed",
      10_000,
    );
    // A Running row left while the worker stayed up (its status writes were lost).
    const lost = await insertRunning(db, ctx.bootId);
    const { job: second } = await ssgJobs.enqueue(db.sql);
    await waitFor(
      "the second rebuild",
      async () => (await ssgJob(db, second.id)).status === "Completed",
      10_000,
    );
    const row = await ssgJob(db, lost);
    assert.deepEqual([row.status, row.error], ["Failed", ssg.INTERRUPTED]);
    assert.ok(
      row.finished_at! <= (await ssgJob(db, second.id)).started_at!,
      "failed before the claim",
    );
  } finally {
    await stop();
  }
});

dbTest("at most one Queued Full job under concurrent requests and publishes", async (db) => {
  const ctx = await ssgContext(db);
  const ids = await Promise.all(
    [1, 2, 3, 4].map((i) =>
      insertEdition(db, ctx.storageDir, { title: `B${i}`, chapters: [], published: false })
    ),
  );
  const pools = [1, 2, 3, 4].map(() =>
    connect(db.url, { schema: db.schema, applicationName: "test-race", max: 4 })
  );
  try {
    const results = await Promise.all(pools.flatMap((pool, p) => [
      ssgJobs.enqueue(pool),
      ssgJobs.requestRebuild({ ...ctx, sql: pool }),
      transaction(pool, ctx.log, (tx) => ssgJobs.publishEdition(tx.sql, ids[p], true)),
      ssgJobs.enqueue(pool),
    ]));
    assert.equal(results.length, 16);
  } finally {
    await Promise.all(pools.map((p) => p.end({ timeout: 1 })));
  }
  assert.equal(await queuedCount(db), 1);
  const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from ssg_rebuild_jobs`;
  assert.equal(n, 1, "every request reused the one queued job");
});

dbTest(
  "a publish during a Running rebuild queues one follow-up, reused by the next",
  async (db) => {
    const ctx = await ssgContext(db);
    const a = await insertEdition(db, ctx.storageDir, {
      title: "A",
      chapters: [],
      published: false,
    });
    const b = await insertEdition(db, ctx.storageDir, {
      title: "B",
      chapters: [],
      published: false,
    });
    const running = (await ssg.claim(ctx)) ??
      (await ssgJobs.enqueue(db.sql), await ssg.claim(ctx));
    assert.ok(running);
    const first = await transaction(
      db.sql,
      ctx.log,
      (tx) => ssgJobs.publishEdition(tx.sql, a, true),
    );
    assert.ok(first && first.published_at);
    assert.notEqual(first.rebuild.id, running.id, "the Running job does not count");
    assert.equal(first.rebuild.status, "Queued");
    const second = await transaction(
      db.sql,
      ctx.log,
      (tx) => ssgJobs.publishEdition(tx.sql, b, true),
    );
    assert.equal(second?.rebuild.id, first.rebuild.id, "the queued follow-up is reused");
    assert.equal(await queuedCount(db), 1);
    // The follow-up, run after the publishes, puts both on the site.
    await ssg.run(ctx, running, new AbortController().signal);
    const next = await ssg.claim(ctx);
    assert.equal(next?.id, first.rebuild.id);
    await ssg.run(ctx, next!, new AbortController().signal);
    const index = await Deno.readTextFile(`${ctx.siteDir}/index.html`);
    assert.ok(index.includes(">A</a>") && index.includes(">B</a>"));
  },
);

dbTest(
  "giveBack() un-counts the attempt and coalesces a queued follow-up into the job",
  async (db) => {
    const ctx = await ssgContext(db);
    await ssgJobs.enqueue(db.sql);
    const job = (await ssg.claim(ctx))!;
    const { job: followUp, created } = await ssgJobs.enqueue(db.sql);
    assert.ok(created);
    assert.equal(await ssg.giveBack(ctx, { ...job, claimed_by: crypto.randomUUID() }), false);
    assert.equal(
      (await ssgJob(db, job.id)).status,
      "Running",
      "a fenced give-back changed nothing",
    );
    assert.equal(await ssg.giveBack(ctx, job), true);
    const row = await ssgJob(db, job.id);
    assert.deepEqual([row.status, row.attempt_count, row.error, row.claimed_by, row.started_at], [
      "Queued",
      0,
      null,
      null,
      null,
    ]);
    assert.equal(await ssgJob(db, followUp.id), undefined);
    assert.equal(await queuedCount(db), 1);
  },
);

dbTest("run() on a lost claim neither completes the job nor switches the site", async (db) => {
  const ctx = await ssgContext(db);
  await insertEdition(db, ctx.storageDir, { title: "A", chapters: [] });
  await ssgJobs.enqueue(db.sql);
  const job = (await ssg.claim(ctx))!;
  await ssg.recover(ctx, new AbortController().signal); // another worker's sweep
  await ssg.run(ctx, job, new AbortController().signal);
  const row = await ssgJob(db, job.id);
  assert.deepEqual([row.status, row.error], ["Failed", ssg.INTERRUPTED]);
  await assert.rejects(Deno.lstat(ctx.siteDir), Deno.errors.NotFound);
});

dbTest("run() past SSG_TIMEOUT_MS fails the job with the reason", async (db) => {
  const ctx = await ssgContext(db);
  await ssgJobs.enqueue(db.sql);
  const job = (await ssg.claim(ctx))!;
  const signal = AbortSignal.abort(new DOMException("Run exceeded 5 ms", "TimeoutError"));
  await ssg.run(ctx, job, signal);
  const row = await ssgJob(db, job.id);
  assert.equal(row.status, "Failed");
  assert.equal(row.error, "Render exceeded SSG_TIMEOUT_MS: Run exceeded 5 ms");
  await assert.rejects(Deno.lstat(ctx.siteDir), Deno.errors.NotFound);
});

dbTest("retry() brings back only a Failed job, and not while another is Queued", async (db) => {
  const ctx = await ssgContext(db);
  await ssgJobs.enqueue(db.sql);
  const job = (await ssg.claim(ctx))!;
  assert.equal(await ssgJobs.retry(ctx, job.id), null, "a Running job is not retried");
  await ssg.recover(ctx, new AbortController().signal);
  const { job: other } = await ssgJobs.enqueue(db.sql);
  assert.equal(await ssgJobs.retry(ctx, job.id), null, "another Full job is queued");
  assert.equal((await ssgJob(db, job.id)).status, "Failed");
  await db.sql`delete from ssg_rebuild_jobs where id = ${other.id}`;
  const retried = await ssgJobs.retry(ctx, job.id);
  assert.deepEqual(
    [retried?.status, retried?.attempt_count, retried?.error, retried?.finished_at],
    ["Queued", 0, null, null],
  );
});

dbTest("stats() counts every status and the age of the queued job", async (db) => {
  assert.deepEqual(await ssgJobs.stats(db.sql), {
    byStatus: { Queued: 0, Running: 0, Completed: 0, Failed: 0 },
    oldestRunnableAgeS: null,
  });
  await insertRunning(db, crypto.randomUUID());
  await db.sql`
    insert into ssg_rebuild_jobs (status, created_at) values ('Queued', now() - interval '30 s')`;
  const stats = await ssgJobs.stats(db.sql);
  assert.deepEqual(stats.byStatus, { Queued: 1, Running: 1, Completed: 0, Failed: 0 });
  assert.ok(stats.oldestRunnableAgeS! >= 30 && stats.oldestRunnableAgeS! < 60);
});
