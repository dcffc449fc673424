/**
 * The rules that keep a job's cost at the floor without loosening any other: the
 * completing statement's chained claim (only after its own fence matched, never of its own job,
 * never without the lock), when each queue recovers, pruning by retention, and NOTIFY only for rows
 * that can wake someone.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "../../lib/db.ts";
import type { ClaimNext, Queue } from "../../lib/queue.ts";
import { QueueLock } from "../../lib/lock.ts";
import * as ingestion from "../../queues/ingestion/mod.ts";
import * as ingestionJobs from "../../queues/ingestion/jobs.ts";
import type { IngestionContext, IngestionJob } from "../../queues/ingestion/mod.ts";
import { dbTest, waitFor } from "../_db.ts";
import {
  ingestionContext,
  insertJob,
  jobRow,
  recordEvents,
  SMALL_BOOK,
  startConsumer,
  writeSource,
} from "../_ingestion.ts";

// A leave to chain that always holds (the tests call the verbs without a lock).
const always: ClaimNext = (sql) => sql`true`;
// A job that ends at once: its path is refused before any file is read (Failed, no extraction).
const ENDS_AT_ONCE = "../outside.txt";

dbTest("run() with claimNext claims the next job in its completing statement", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const first = await insertJob(db, path);
  const second = await insertJob(db, path);
  const job = (await ingestion.claim(ctx))!;
  const rec = recordEvents(ctx.events);
  const next = await ingestion.run(ctx, job, new AbortController().signal, always);
  await rec.stop();
  assert.equal((await jobRow(db, first)).status, "Completed");
  assert.ok(next);
  assert.deepEqual([next.id, next.attempt_count, next.claimed_by], [second, 1, ctx.bootId]);
  const row = await jobRow(db, second);
  assert.deepEqual([row.status, row.attempt_count, row.claimed_by], ["Processing", 1, ctx.bootId]);
  assert.deepEqual(
    rec.events.map((e) => [e.id, e.transition]),
    [[first, "completed"], [second, "claimed"]],
    "the chained claim is published after the completion, both after the commit",
  );
  // The last job's chained claim finds nothing: null, not "did not chain".
  assert.equal(await ingestion.run(ctx, next, new AbortController().signal, always), null);
  // Without the leave, nothing is chained.
  await insertJob(db, path);
  const third = (await ingestion.claim(ctx))!;
  const fourth = await insertJob(db, path);
  assert.equal(await ingestion.run(ctx, third, new AbortController().signal), undefined);
  assert.equal((await jobRow(db, fourth)).status, "Queued");
});

dbTest("run() chains no claim when its own completion's fence missed", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const lost = await insertJob(db, path);
  const job = (await ingestion.claim(ctx))!;
  // The claim was lost (here: the row left Processing under the run).
  await db.sql`update ingestion_jobs set status = 'Failed' where id = ${lost}`;
  const waiting = await insertJob(db, path);
  const next = await ingestion.run(ctx, job, new AbortController().signal, always);
  assert.equal(next, undefined);
  assert.equal((await jobRow(db, waiting)).status, "Queued", "no claim rode on a lost one");
});

dbTest("run() never chains its own job, even when it has gone stale", async (db) => {
  const ctx = await ingestionContext(db, { staleAfterMs: 1 });
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const id = await insertJob(db, path);
  const job = (await ingestion.claim(ctx))!;
  await db.sql`update ingestion_jobs set claimed_at = now() - interval '1 minute' where id = ${id}`;
  const next = await ingestion.run(ctx, job, new AbortController().signal, always);
  assert.equal(next, null);
  const row = await jobRow(db, id);
  assert.deepEqual([row.status, row.attempt_count], ["Completed", 1]);
});

dbTest("run() chains nothing under a lock fence that does not hold", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  await insertJob(db, path);
  const job = (await ingestion.claim(ctx))!;
  const waiting = await insertJob(db, path);
  // Never acquired: its fence is false in SQL, as a lost lock's is.
  const lock = new QueueLock({ url: db.url, schema: db.schema, queue: "ingestion", log: ctx.log });
  const next = await ingestion.run(
    ctx,
    job,
    new AbortController().signal,
    (sql) => lock.claimFence(sql),
  );
  assert.equal(next, null);
  assert.equal((await jobRow(db, waiting)).status, "Queued");
});

/** The ingestion queue with its recoveries counted, its recovery schedule optionally replaced. */
function counted(
  recoverOn: "claim" | "poll" = ingestion.recoverOn,
  run: Queue<IngestionJob, IngestionContext>["run"] = ingestion.run,
) {
  const recovered: number[] = [];
  const leaves: Array<boolean> = [];
  const queue: Queue<IngestionJob, IngestionContext> = {
    ...ingestion,
    recoverOn,
    recover: (c, signal) => (recovered.push(performance.now()), ingestion.recover(c, signal)),
    // What the consumer answered when the run asked, in its completing write.
    run: (c, job, signal, claimNext) =>
      run(c, job, signal, (sql) => {
        const fence = claimNext?.(sql) ?? null;
        leaves.push(fence !== null);
        return fence;
      }),
  };
  return { queue, recovered, leaves };
}

dbTest(
  "Consumer recovers the ingestion queue when it takes the lock, not before every claim",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { queue, recovered } = counted();
    const running = await startConsumer(db, ctx, { queue, pollIntervalMs: 30_000 });
    try {
      await waitFor("the lock", () => running.lock.held);
      await db.sql`
        insert into ingestion_jobs (source_path) select ${ENDS_AT_ONCE} from generate_series(1, 5)`;
      await waitFor("five ended jobs", async () => {
        const [{ n }] = await db.sql`
          select count(*)::int as n from ingestion_jobs where status = 'Failed'`;
        return n === 5;
      }, 10_000);
      await sleep(200); // the drain's last, empty claim
      assert.equal(recovered.length, 1, "once, at lock acquisition");
    } finally {
      await running.stop();
    }
  },
);

dbTest(
  "Consumer recovers a queue before every claim when it asks so (ADR-022, SSG) and never lets it chain",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const { queue, recovered, leaves } = counted("claim");
    const running = await startConsumer(db, ctx, { queue, pollIntervalMs: 30_000 });
    try {
      await waitFor("the lock", () => running.lock.held);
      await waitFor("the first, empty round", () => recovered.length >= 1);
      await db.sql`
        insert into ingestion_jobs (source_path) select ${path} from generate_series(1, 3)`;
      await waitFor("three completed jobs", async () => {
        const [{ n }] = await db.sql`
          select count(*)::int as n from ingestion_jobs where status = 'Completed'`;
        return n === 3;
      }, 30_000);
      await waitFor("the drain's last, empty claim", () => recovered.length >= 5, 5000);
      assert.deepEqual(leaves, [false, false, false], "no leave to chain");
    } finally {
      await running.stop();
    }
  },
);

dbTest(
  "Consumer: a poll tick ends a chain, so the recovery runs in the middle of a long drain",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const completedAt: number[] = [];
    const { queue, recovered, leaves } = counted("poll", async (c, job, signal, claimNext) => {
      await sleep(150); // a run longer than the poll interval
      const next = await ingestion.run(c, job, signal, claimNext);
      completedAt.push(performance.now());
      return next;
    });
    const running = await startConsumer(db, ctx, { queue, pollIntervalMs: 100 });
    try {
      await waitFor("the lock", () => running.lock.held);
      await db.sql`
        insert into ingestion_jobs (source_path) select ${path} from generate_series(1, 6)`;
      await waitFor("six completed jobs", () => completedAt.length === 6, 60_000);
      const first = completedAt[0];
      const last = completedAt[5];
      assert.ok(
        recovered.some((t) => t > first && t < last),
        `a recovery between the first and the last job: ${recovered} vs ${first}…${last}`,
      );
      assert.ok(leaves.some((leave) => !leave), "a tick withheld the leave to chain");
    } finally {
      await running.stop();
    }
  },
);

dbTest("prune() deletes finished jobs past the retention, and nothing else", async (db) => {
  const ctx = { ...(await ingestionContext(db)), retentionDays: 7 };
  await db.sql`
    insert into ingestion_jobs (source_path, status, finished_at)
    select 'old.txt', 'Completed', now() - interval '8 days' from generate_series(1, 1200)`;
  const [failed, recent, queued, running] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path, status, finished_at, attempt_count)
    values ('failed.txt', 'Failed', now() - interval '30 days', 3),
           ('recent.txt', 'Completed', now() - interval '6 days', 1),
           ('queued.txt', 'Queued', null, 0),
           ('running.txt', 'Processing', null, 1)
    returning id`;
  const remaining = async () => {
    const [{ n }] = await db.sql`select count(*)::int as n from ingestion_jobs`;
    return n;
  };
  await ingestion.prune(ctx, new AbortController().signal);
  // At least one full batch per call; the rest on later ticks if the budget ran out.
  assert.ok((await remaining()) <= 1204 - ingestion.PRUNE_BATCH);
  for (let i = 0; i < 10 && (await remaining()) > 3; i++) {
    await ingestion.prune(ctx, new AbortController().signal);
  }
  const left = await db.sql<{ id: string }[]>`select id from ingestion_jobs order by id`;
  assert.deepEqual(left.map((r) => r.id), [recent.id, queued.id, running.id]);
  assert.ok(failed.id);
  // Without a retention setting nothing is deleted, however old.
  await db
    .sql`update ingestion_jobs set status = 'Completed', finished_at = now() - interval '1 year'`;
  await ingestion.prune({ ...ctx, retentionDays: null }, new AbortController().signal);
  assert.equal(await remaining(), 3);
});

dbTest(
  "ingestion_jobs NOTIFY: a row that becomes Queued wakes the queue; a claim or a completion does not",
  async (db) => {
    const ctx = await ingestionContext(db);
    const listenerSql = connect(db.url, {
      schema: db.schema,
      applicationName: `${db.applicationName}-listener`,
      max: 1,
    });
    let heard = 0;
    await listenerSql.listen(`${db.schema}.ingestion_jobs`, () => void heard++);
    const quiet = async (what: string) => {
      const before = heard;
      await sleep(300);
      assert.equal(heard, before, `${what} sent no NOTIFY`);
    };
    try {
      await insertJob(db, ENDS_AT_ONCE);
      await waitFor("the insert's NOTIFY", () => heard === 1);
      const job = (await ingestion.claim(ctx))!;
      await quiet("a claim");
      await ingestion.run(ctx, job, new AbortController().signal); // refused path: Failed
      await quiet("a failure");
      assert.ok(await ingestionJobs.retry(ctx, job.id));
      await waitFor("the admin retry's NOTIFY", () => heard === 2);
      const again = (await ingestion.claim(ctx))!;
      await quiet("a claim");
      assert.equal(await ingestion.giveBack(ctx, again), true);
      await waitFor("the give-back's NOTIFY", () => heard === 3);
    } finally {
      await listenerSql.end({ timeout: 1 });
    }
  },
);
