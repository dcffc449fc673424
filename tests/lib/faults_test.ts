/**
 * Faults, in process: the faults a deployment meets, each against the real consumer, lock and
 * listener on real PostgreSQL, with tests/_proxy.ts standing in for the network in between.
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/db.ts";
import { Listener } from "../../lib/listener.ts";
import { QueueLock } from "../../lib/lock.ts";
import { Wake } from "../../lib/wake.ts";
import type { Queue } from "../../lib/queue.ts";
import * as ingestion from "../../queues/ingestion/mod.ts";
import type { IngestionContext, IngestionJob } from "../../queues/ingestion/mod.ts";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import type { InFlightError } from "../../lib/lifecycle.ts";
import { extractBook } from "../../books/extract.ts";
import {
  ingestionContext,
  insertJob,
  jobRow,
  recordEvents,
  SMALL_BOOK,
  spyLog,
  startConsumer,
  writeSource,
} from "../_ingestion.ts";
import { startProxy } from "../_proxy.ts";
import { mkfifo, releaseFifo } from "../_fs.ts";

dbTest(
  "Listener notices dropped notifications, reconnects, and is live once they flow",
  async (db) => {
    const ctx = await ingestionContext(db);
    const proxy = startProxy(db.url);
    const wake = new Wake("ingestion");
    const listener = new Listener({
      connect: (hooks) =>
        connect(proxy.url, {
          schema: db.schema,
          applicationName: "t-listener",
          max: 1,
          dedicated: true,
          ...hooks,
        }),
      pool: db.sql,
      log: ctx.log,
      probeChannel: `${db.schema}._probe`,
      probeEveryMs: 60_000,
      probeTimeoutMs: 300,
    });
    try {
      await listener.listen(`${db.schema}.ingestion_jobs`, wake);
      assert.equal(await listener.start(), true);
      assert.equal(listener.live, true);
      proxy.dropNotifications(/-listener$/);
      assert.equal(await listener.probe(), false, "a dropped probe is a miss");
      assert.equal(listener.degraded, true);
      assert.equal(listener.probeFailures, 1);
      assert.equal(listener.reconnects, 1);
      assert.ok(proxy.dropped >= 1);
      proxy.dropNotifications(null);
      assert.equal(await listener.probe(), true);
      assert.equal(listener.live, true);
      assert.equal(listener.degraded, false);
    } finally {
      await listener.close();
      await proxy.close();
    }
  },
);

dbTest(
  "Listener: a black-holed connection is replaced and its onlisten wakes the queue",
  async (db) => {
    const ctx = await ingestionContext(db);
    const proxy = startProxy(db.url);
    const wake = new Wake("ingestion");
    const listener = new Listener({
      connect: (hooks) =>
        connect(proxy.url, {
          schema: db.schema,
          applicationName: "t-listener",
          max: 1,
          dedicated: true,
          ...hooks,
        }),
      pool: db.sql,
      log: ctx.log,
      probeChannel: `${db.schema}._probe`,
      probeEveryMs: 60_000,
      probeTimeoutMs: 300,
    });
    try {
      await listener.listen(`${db.schema}.ingestion_jobs`, wake);
      await listener.start();
      await wake.wait(AbortSignal.timeout(1000)); // the first onlisten's wake
      assert.equal(proxy.blackhole(/^t-listener$/), 1);
      await insertJob(db, "lost.txt"); // its NOTIFY goes into the black hole
      assert.equal(await listener.probe(), false);
      assert.equal(await wake.wait(AbortSignal.timeout(3000)), true, "the catch-up wake");
      assert.equal(await listener.probe(), true, "the new connection delivers");
    } finally {
      await listener.close();
      await proxy.close();
    }
  },
);

dbTest(
  "recoverOrphans() re-queues another boot's rows with the attempt spent, fails them at the cap, and gives this boot's back",
  async (db) => {
    const ctx = await ingestionContext(db);
    const other = crypto.randomUUID();
    const [a, b, c] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path, status, attempt_count, claimed_by, claimed_at, run_after)
    values ('a.txt', 'Processing', 1, ${other}, now(), now() + interval '1 hour'),
           ('b.txt', 'Processing', 3, ${other}, now(), now()),
           ('c.txt', 'Processing', 2, ${ctx.bootId}, now(), now())
    returning id`;
    const recorded = recordEvents(ctx.events);
    await ingestion.recoverOrphans(ctx, AbortSignal.timeout(5000));
    await recorded.stop();
    const ra = await jobRow(db, a.id);
    assert.deepEqual([ra.status, ra.attempt_count, ra.claimed_by], ["Queued", 1, null]);
    assert.match(ra.error ?? "", /interrupted: attempt 1 of 3/);
    assert.ok(ra.run_after.getTime() <= Date.now() + 1000, "due at once");
    const rb = await jobRow(db, b.id);
    assert.deepEqual([rb.status, rb.attempt_count], ["Failed", 3]);
    assert.match(rb.error ?? "", /attempts exhausted/);
    const rc = await jobRow(db, c.id);
    assert.deepEqual([rc.status, rc.attempt_count, rc.error], ["Queued", 1, null]);
    assert.deepEqual(
      recorded.events.map((e) => [e.id, e.transition, e.status]).sort(),
      [[a.id, "recovered", "Queued"], [b.id, "recovered", "Failed"], [c.id, "given_back", "Queued"]]
        .sort(),
    );
  },
);

dbTest(
  "recoverOrphans() scope own gives back this boot's rows and leaves another boot's claim alone",
  async (db) => {
    // The sweep after a claim whose reply was lost: another boot's row may be a standby's live
    // claim (this consumer's lock lost but not yet noticed).
    const ctx = await ingestionContext(db);
    const other = crypto.randomUUID();
    const [theirs, mine] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path, status, attempt_count, claimed_by, claimed_at)
    values ('a.txt', 'Processing', 1, ${other}, now()),
           ('b.txt', 'Processing', 2, ${ctx.bootId}, now())
    returning id`;
    await ingestion.recoverOrphans(ctx, AbortSignal.timeout(5000), "own");
    const t = await jobRow(db, theirs.id);
    assert.deepEqual([t.status, t.attempt_count, t.claimed_by], ["Processing", 1, other]);
    const m = await jobRow(db, mine.id);
    assert.deepEqual([m.status, m.attempt_count, m.claimed_by], ["Queued", 1, null]);
  },
);

dbTest(
  "Consumer re-picks a SIGKILLed owner's job at once on taking the lock, not after the stale threshold",
  async (db) => {
    const ctx = await ingestionContext(db); // staleAfterMs: 10 min
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const [{ id }] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path, status, attempt_count, claimed_by, claimed_at)
    values (${path}, 'Processing', 1, ${crypto.randomUUID()}, now()) returning id`;
    const running = await startConsumer(db, ctx);
    try {
      await waitFor(
        "the orphan completed",
        async () => (await jobRow(db, id)).status === "Completed",
        20_000,
      );
      assert.equal((await jobRow(db, id)).attempt_count, 2, "the killed run's attempt is spent");
    } finally {
      await running.stop();
    }
  },
);

dbTest(
  "Consumer retries a give-back the database refused until it lands within the shutdown budget",
  async (db) => {
    const proxy = startProxy(db.url);
    const pool = connect(proxy.url, { schema: db.schema, applicationName: "t-pool", max: 2 });
    const called = await ingestionContext(db);
    // A run that did stop, with a slow give-back, is not a run that ignored its abort.
    const stuck: unknown[] = [];
    const ctx = {
      ...called,
      sql: pool,
      log: spyLog(called.log, "job ignored its abort signal; settling it", stuck),
    };
    const fifo = `${ctx.storageDir}/slow.txt`;
    await mkfifo(fifo);
    const id = await insertJob(db, "slow.txt");
    let attempts = 0;
    const queue: Queue<IngestionJob, IngestionContext> = {
      ...ingestion,
      giveBack: (c, job) => (attempts++, ingestion.giveBack(c, job)),
    };
    const recorded = recordEvents(ctx.events);
    // A short grace: the give-back outlasts it, and must still not count as a stuck run.
    const running = await startConsumer(db, ctx, { queue, abortGraceMs: 300 });
    try {
      await waitForClaimHeard(recorded, id);
      proxy.cut(); // the database goes away under the running job
      // stop() throws InFlightError if the give-back never landed.
      const stopped = running.stop(9000).then(() => null, (err: Error) => err);
      // Back only after the consumer kept trying: the give-back is retried, not tried once.
      await waitFor("a third give-back attempt", () => attempts >= 3, 8500);
      proxy.restore();
      assert.equal(await stopped, null, "stop() resolved: the give-back landed within the budget");
      const row = await jobRow(db, id);
      assert.deepEqual(
        [row.status, row.attempt_count],
        ["Queued", 0],
        "given back, attempt not counted",
      );
      assert.deepEqual(stuck, [], "the run stopped: only its give-back was slow");
    } finally {
      await releaseFifo(fifo);
      await recorded.stop();
      await pool.end({ timeout: 1 });
      await proxy.close();
    }
  },
);

dbTest(
  "Consumer.stop() throws InFlightError naming a job whose give-back never committed",
  async (db) => {
    const proxy = startProxy(db.url);
    const pool = connect(proxy.url, { schema: db.schema, applicationName: "t-pool", max: 2 });
    const ctx = { ...(await ingestionContext(db)), sql: pool };
    const fifo = `${ctx.storageDir}/slow.txt`;
    await mkfifo(fifo);
    const id = await insertJob(db, "slow.txt");
    const recorded = recordEvents(ctx.events);
    const running = await startConsumer(db, ctx);
    try {
      await waitForClaimHeard(recorded, id);
      proxy.cut();
      await assert.rejects(running.stop(800), (err: Error) => {
        assert.equal(err.name, "InFlightError");
        assert.match(err.message, new RegExp(`\\b${id}\\b`));
        return true;
      });
      assert.equal((await jobRow(db, id)).status, "Processing");
    } finally {
      await releaseFifo(fifo);
      await recorded.stop();
      await pool.end({ timeout: 1 });
      await proxy.close();
    }
  },
);

dbTest(
  "Consumer gives back a job whose claim's reply was lost and runs it at once, the attempt not counted",
  async (db) => {
    const { proxy, running, recorded, id, close } = await lostClaim(db);
    try {
      proxy.restore();
      // Without the sweep the job stayed Processing until the stale rule (10 min).
      await waitFor(
        "the job completed",
        () => recorded.events.some((e) => e.id === id && e.transition === "completed"),
        10_000,
      );
      assert.equal((await jobRow(db, id)).attempt_count, 1, "the lost claim's attempt not counted");
      assert.deepEqual(
        recorded.events.filter((e) => e.id === id).map((e) => e.transition),
        ["given_back", "claimed", "completed"],
      );
    } finally {
      await running.stop().catch(() => {});
      await close();
    }
  },
);

dbTest(
  "Consumer gives back the job a lost completing statement chained, and runs it at once",
  async (db) => {
    const proxy = startProxy(db.url);
    const pool = connect(proxy.url, { schema: db.schema, applicationName: "t-pool", max: 1 });
    const base = await ingestionContext(db);
    // The first run waits at its extraction until the test has muted the pool's replies.
    const gate = Promise.withResolvers<void>();
    let runs = 0;
    const extract = base.extract ?? extractBook;
    const ctx: IngestionContext = {
      ...base,
      sql: pool,
      extract: async (file, signal) => {
        if (runs++ === 0) await gate.promise;
        return await extract(file, signal);
      },
    };
    const recorded = recordEvents(base.events);
    const idle = idleQueue();
    const running = await startConsumer(db, ctx, { queue: idle.queue });
    try {
      runs = 1; // the warm-up is not gated
      await warmUp(db, ctx, idle);
      runs = 0;
      const first = await insertJob(db, await writeSource(ctx.storageDir, "a.txt", SMALL_BOOK));
      const second = await insertJob(db, await writeSource(ctx.storageDir, "b.txt", SMALL_BOOK));
      await waitForClaimHeard(recorded, first);
      assert.equal(proxy.muteReplies(/^t-pool$/), 1);
      gate.resolve();
      // The first job's save commits with the second one's claim chained into it, unheard.
      await waitFor(
        "the chained claim committed",
        async () => (await jobRow(db, second)).status === "Processing",
      );
      assert.equal((await jobRow(db, first)).status, "Completed");
      proxy.cut();
      // The cut fails the save that never heard its reply; what the run and the consumer do next
      // goes through new connections (postgres.js waits through the refused connects meanwhile).
      proxy.restore();
      await waitFor(
        "the chained job completed",
        () => recorded.events.some((e) => e.id === second && e.transition === "completed"),
        10_000,
      );
      assert.equal(
        (await jobRow(db, second)).attempt_count,
        1,
        "the lost claim's attempt not counted",
      );
      assert.deepEqual(
        recorded.events.filter((e) => e.id === second).map((e) => e.transition),
        ["given_back", "claimed", "completed"],
      );
    } finally {
      gate.resolve();
      await running.stop().catch(() => {});
      await recorded.stop();
      await pool.end({ timeout: 1 });
      await proxy.close();
    }
  },
);

dbTest(
  "Consumer.stop() throws InFlightError for a claim whose reply was lost while the database is away",
  async (db) => {
    const { running, id, close } = await lostClaim(db);
    try {
      // The process must not exit as if nothing were left in flight: the row is Processing.
      await assert.rejects(running.consumer.stop(performance.now() + 800), (err: InFlightError) => {
        assert.equal(err.name, "InFlightError");
        assert.equal(err.claimUnheard, true);
        assert.deepEqual(err.ids, []);
        assert.match(err.message, /a claim whose reply was lost/);
        return true;
      });
      assert.equal((await jobRow(db, id)).status, "Processing");
    } finally {
      await running.listenerSql.end({ timeout: 1 });
      await close();
    }
  },
);

dbTest(
  "Consumer.stop() gives back what a claim whose reply was lost took: Queued, attempt not counted",
  async (db) => {
    const { proxy, running, id, close } = await lostClaim(db);
    try {
      proxy.restore();
      // A deploy now, with the database back: the job goes back as a shutdown's does (ADR-022).
      await running.stop(3000);
      const row = await jobRow(db, id);
      assert.deepEqual([row.status, row.attempt_count, row.error], ["Queued", 0, null]);
    } finally {
      await close();
    }
  },
);

dbTest("Consumer wakes for a job due in 1 s although the poll interval is 30 s", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const running = await startConsumer(db, ctx, { pollIntervalMs: 30_000 });
  try {
    await waitFor("the lock", () => running.lock.held);
    const recorded = recordEvents(ctx.events);
    const [{ id }] = await db.sql<{ id: string }[]>`
      insert into ingestion_jobs (source_path, run_after)
      values (${path}, now() + interval '1 second') returning id`;
    const t0 = performance.now();
    await waitFor(
      "the delayed job claimed",
      () => recorded.events.some((e) => e.id === id && e.transition === "claimed"),
      10_000,
      10,
    );
    const waited = performance.now() - t0;
    await recorded.stop();
    assert.ok(waited >= 900 && waited < 5000, `claimed when due, not at the poll: ${waited} ms`);
  } finally {
    await running.stop();
  }
});

dbTest("Consumer says it cannot get a lock connection instead of standing by", async (db) => {
  const ctx = await ingestionContext(db);
  const role = `t_nolimit_${crypto.randomUUID().slice(0, 8)}`;
  await db.sql`create role ${db.sql(role)} login password 'pw' connection limit 0`;
  const url = new URL(db.url);
  url.username = role;
  url.password = "pw";
  const { Consumer } = await import("../../lib/consumer.ts");
  const lock = new QueueLock({
    url: url.toString(),
    schema: db.schema,
    queue: "ingestion",
    log: ctx.log,
  });
  const consumer = new Consumer({
    queue: ingestion,
    ctx,
    lock,
    wake: new Wake("ingestion"),
    pollIntervalMs: 30_000,
    standbyRetryMs: 50,
    runTimeoutMs: 60_000,
  });
  try {
    consumer.start();
    await waitFor("no-connection", () => consumer.state === "no-connection");
  } finally {
    await consumer.stop(performance.now() + 1000);
    await db.sql`drop role ${db.sql(role)}`;
  }
});

dbTest(
  "QueueLock: a claim fenced on the lock takes nothing once the lock session is gone",
  async (db) => {
    const ctx = await ingestionContext(db);
    const id = await insertJob(db, "a.txt");
    const newLock = () =>
      new QueueLock({
        url: db.url,
        schema: db.schema,
        queue: "ingestion",
        log: ctx.log,
        heartbeatMs: 60_000,
      });
    const lock = newLock();
    try {
      assert.equal(await lock.tryAcquire(), true);
      const fence = () => lock.claimFence(db.sql);
      const pid = lock.backendPid!;
      // Built while held, run after the session died: the SQL itself refuses.
      const stale = fence();
      await db.sql`select pg_terminate_backend(${pid})`;
      await waitFor(
        "the lock session gone",
        async () => (await db.sql`select 1 from pg_stat_activity where pid = ${pid}`).length === 0,
      );
      assert.equal(await ingestion.claim(ctx, stale), null);
      assert.equal((await jobRow(db, id)).status, "Queued");
      // Nor once a standby holds the queue's lock: the fence is this session's, not "someone's".
      const standby = newLock();
      try {
        assert.equal(await standby.tryAcquire(), true);
        assert.equal(await ingestion.claim(ctx, stale), null);
        assert.equal((await jobRow(db, id)).status, "Queued");
      } finally {
        await standby.release();
      }
      // And a fresh lock lets the same claim through, once the lock has seen its session close
      // (until then it still counts itself held, with the dead session's pid).
      await waitFor("the lock lost", () => lock.lost.aborted);
      assert.equal(await lock.tryAcquire(), true);
      assert.equal((await ingestion.claim(ctx, fence()))?.id, id);
    } finally {
      await lock.release();
    }
  },
);

dbTest(
  "QueueLock: a black-holed lock session counts as lost within the heartbeat deadline",
  async (db) => {
    const ctx = await ingestionContext(db);
    const proxy = startProxy(db.url);
    const lock = new QueueLock({
      url: proxy.url,
      schema: db.schema,
      queue: "ingestion",
      log: ctx.log,
      heartbeatMs: 100,
      heartbeatTimeoutMs: 300,
    });
    try {
      assert.equal(await lock.tryAcquire(), true);
      proxy.blackhole(/-lock-ingestion$/);
      await waitFor("the lock lost", () => lock.lost.aborted, 2000);
      assert.equal(lock.held, false);
    } finally {
      await lock.release();
      await proxy.close();
    }
  },
);

dbTest(
  "Consumer settles a run that ignores its timeout after the grace period and moves on",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const stuck = await insertJob(db, "stuck.txt");
    await db.sql`update ingestion_jobs set attempt_count = 2 where id = ${stuck}`;
    const next = await insertJob(db, path);
    const never = Promise.withResolvers<void>();
    const queue: Queue<IngestionJob, IngestionContext> = {
      ...ingestion,
      run: (c, job, signal) =>
        job.source_path === "stuck.txt" ? never.promise : ingestion.run(c, job, signal),
    };
    // The real job gets time to run (its extraction worker starts in a few hundred ms); the stuck
    // one is on its third and last attempt, so it is settled once.
    const running = await startConsumer(db, ctx, { queue, runTimeoutMs: 3000, abortGraceMs: 200 });
    try {
      await waitFor(
        "the next job completed",
        async () => (await jobRow(db, next)).status === "Completed",
        20_000,
      );
      const row = await jobRow(db, stuck);
      assert.deepEqual([row.status, row.attempt_count], ["Failed", 3]);
      assert.match(
        row.error ?? "",
        /attempts exhausted \(3 of 3\): Run exceeded .*ignored its abort/,
      );
    } finally {
      never.resolve();
      await running.stop();
    }
  },
);

dbTest(
  "Consumer: a run that outlives its stale threshold is neither re-picked nor run twice",
  async (db) => {
    const ctx = await ingestionContext(db, { staleAfterMs: 200 });
    const fifo = `${ctx.storageDir}/slow.txt`;
    await mkfifo(fifo);
    const id = await insertJob(db, "slow.txt");
    const recorded = recordEvents(ctx.events);
    const running = await startConsumer(db, ctx, { pollIntervalMs: 50 });
    try {
      await waitFor("the job claimed", async () => (await jobRow(db, id)).status === "Processing");
      // Many poll ticks past the stale threshold while the run is still going.
      await waitFor(
        "stale on the database clock",
        async () => {
          const [{ stale }] = await db.sql`
        select claimed_at < now() - interval '1 second' as stale from ingestion_jobs where id = ${id}`;
          return stale;
        },
        5000,
        50,
      );
      await Deno.writeTextFile(fifo, SMALL_BOOK); // the run finishes
      await waitFor("completed", async () => (await jobRow(db, id)).status === "Completed", 20_000);
      const row = await jobRow(db, id);
      assert.equal(row.attempt_count, 1);
      await recorded.stop();
      assert.equal(recorded.events.filter((e) => e.transition === "claimed").length, 1);
    } finally {
      await running.stop();
    }
  },
);

// Wait until the consumer has heard its claim's reply (the claim publishes "claimed" once the reply
// arrives). A row already `Processing` is not enough before a cut: the reply can still be on its
// way through the proxy, and a cut then loses it, so the consumer never learns it claimed the job
// (stop() would resolve with no job in flight to give back).
async function waitForClaimHeard(
  recorded: { events: { id: string; transition: string }[] },
  id: string,
) {
  await waitFor(
    "the consumer heard its claim",
    () => recorded.events.some((e) => e.id === id && e.transition === "claimed"),
  );
}

// The ingestion queue, counting the times the consumer went idle: `nextDueMs` is the last thing
// it asks the database before it waits for a wake.
function idleQueue(): { queue: Queue<IngestionJob, IngestionContext>; count: number } {
  const idle = {
    count: 0,
    queue: {
      ...ingestion,
      nextDueMs: async (ctx: IngestionContext) => {
        const ms = await ingestion.nextDueMs(ctx);
        idle.count++;
        return ms;
      },
    },
  };
  return idle;
}

// Run one job through the consumer until it waits for the next wake, so the pool's connection is
// open, has prepared the claim and the completing statement, and has no reply on its way: a muted
// connection cannot prepare a statement (postgres.js waits for the describe's reply before it
// executes), and the lost reply must be an execution's.
async function warmUp(db: TestDb, ctx: IngestionContext, idle: { count: number }): Promise<void> {
  const before = idle.count;
  const id = await insertJob(db, await writeSource(ctx.storageDir, "warm-up.txt", SMALL_BOOK));
  await waitFor(
    "the warm-up job completed",
    async () => (await jobRow(db, id)).status === "Completed",
  );
  await waitFor("the consumer idle", () => idle.count > before);
}

// A consumer whose pool (one connection) goes through a proxy, warmed up; then a job whose claim
// commits while its reply is lost, and whose connection is then cut (the proxy stays cut). The
// caller stops the consumer, then calls `close`.
async function lostClaim(db: TestDb) {
  const proxy = startProxy(db.url);
  const pool = connect(proxy.url, { schema: db.schema, applicationName: "t-pool", max: 1 });
  const ctx = { ...(await ingestionContext(db)), sql: pool };
  const recorded = recordEvents(ctx.events);
  const close = async () => {
    await recorded.stop();
    await pool.end({ timeout: 1 });
    await proxy.close();
  };
  const idle = idleQueue();
  const running = await startConsumer(db, ctx, { queue: idle.queue });
  try {
    await warmUp(db, ctx, idle);
    assert.equal(proxy.muteReplies(/^t-pool$/), 1);
    const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
    await waitFor(
      "the claim committed",
      async () => (await jobRow(db, id)).status === "Processing",
    );
    proxy.cut();
    await waitFor("the claim round failed", () => running.consumer.roundFailures > 0);
    return { proxy, running, recorded, id, close };
  } catch (err) {
    await running.stop().catch(() => {});
    await close();
    throw err;
  }
}
