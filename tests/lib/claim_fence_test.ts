/**
 * The lock's claim fence in every queue the consumer drives (ADR-022): a claim run with
 * the fence of a lock whose session is gone takes nothing, even while a standby holds the queue's
 * lock and is the one consumer. The queue contract (lib/consumer.ts `Queue.claim`) lets a claim
 * ignore its `lockHeld` argument without a type error, so each queue is checked here.
 */
import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { QueueLock } from "../../lib/lock.ts";
import { createLogger } from "../../lib/log.ts";
import type { ClaimedJob, Queue, QueueContext } from "../../lib/queue.ts";
import * as ingestion from "../../queues/ingestion/mod.ts";
import * as ssg from "../../queues/ssg/mod.ts";
import * as userIngestion from "../../queues/user_ingestion/mod.ts";
import * as enrichment from "../../queues/enrichment/mod.ts";
import { ingestionContext, insertJob } from "../_ingestion.ts";
import { ssgContext } from "../_ssg.ts";
import {
  enrichmentContext,
  insertReadyBook,
  insertUserBook,
  userIngestionContext,
} from "../_user_books.ts";

/**
 * Claim under a fence built while the lock was held, after its session died and a standby took
 * the lock: nothing. Then the standby's own fence claims the same row (it was claimable).
 */
async function checkFence<J extends ClaimedJob, C extends QueueContext>(
  db: TestDb,
  queue: Pick<Queue<J, C>, "name" | "claim">,
  ctx: C,
  id: string,
): Promise<void> {
  const newLock = () =>
    new QueueLock({
      url: db.url,
      schema: db.schema,
      queue: queue.name,
      log: createLogger("silent"),
      heartbeatMs: 60_000,
    });
  const lock = newLock();
  const standby = newLock();
  try {
    assert.equal(await lock.tryAcquire(), true);
    const stale = lock.claimFence(db.sql);
    const pid = lock.backendPid!;
    await db.sql`select pg_terminate_backend(${pid})`;
    await waitFor(
      "the lock session gone",
      async () => (await db.sql`select 1 from pg_stat_activity where pid = ${pid}`).length === 0,
    );
    assert.equal(await standby.tryAcquire(), true);
    assert.equal(await queue.claim(ctx, stale), null, `${queue.name}: a lost lock claimed`);
    assert.equal((await queue.claim(ctx, standby.claimFence(db.sql)))?.id, id);
  } finally {
    await standby.release();
    await lock.release();
  }
}

dbTest("ingestion.claim() takes nothing under a lost lock's fence", async (db) => {
  const ctx = await ingestionContext(db);
  await checkFence(db, ingestion, ctx, await insertJob(db, "a.txt"));
});

dbTest("ssg.claim() takes nothing under a lost lock's fence", async (db) => {
  const ctx = await ssgContext(db);
  const [row] = await db.sql<{ id: string }[]>`
    insert into ssg_rebuild_jobs default values returning id`;
  await checkFence(db, ssg, ctx, row.id);
});

dbTest("user_ingestion.claim() takes nothing under a lost lock's fence", async (db) => {
  const ctx = await userIngestionContext(db);
  const { jobId } = await insertUserBook(db, "a.txt");
  await checkFence(db, userIngestion, ctx, jobId);
});

dbTest("enrichment.claim() takes nothing under a lost lock's fence", async (db) => {
  const ctx = enrichmentContext(db);
  await checkFence(db, enrichment, ctx, await insertReadyBook(db, ["<p>One.</p>"]));
});
