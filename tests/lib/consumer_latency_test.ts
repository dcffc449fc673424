/**
 * The consumer under load and after a dropped listener: start latency, back-to-back throughput,
 * catch-up. Kept apart from tests/lib/consumer_test.ts (stop, give-back, timeout, lock), whose
 * tests the mutation check runs per mutation.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Sql } from "../../lib/db.ts";
import { dbTest, waitFor } from "../_db.ts";
import { ingestionContext, SMALL_BOOK, startConsumer, writeSource } from "../_ingestion.ts";

async function status(db: { sql: Sql }, id: string): Promise<string> {
  const [row] = await db.sql<
    { status: string }[]
  >`select status from ingestion_jobs where id = ${id}`;
  return row.status;
}

async function enqueueBook(db: { sql: Sql }, path: string): Promise<string> {
  const [row] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path) values (${path}) returning id`;
  return row.id;
}

dbTest(
  "Consumer starts a job within 100 ms of its commit while the poll interval is 30 s",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const claimedAt = new Map<string, number>();
    const sub = ctx.events.subscribe(1000);
    const reader = (async () => {
      for await (const e of sub.channel) {
        if (e.transition === "claimed") claimedAt.set(e.id, performance.now());
      }
    })();
    const running = await startConsumer(db, ctx, { pollIntervalMs: 30_000 });
    try {
      await waitFor("the lock", () => running.lock.held);
      const latencies: number[] = [];
      for (let i = 0; i < 7; i++) {
        const id = await enqueueBook(db, path);
        const committed = performance.now();
        await waitFor(`job ${id} claimed`, () => claimedAt.has(id), 5000, 1);
        latencies.push(claimedAt.get(id)! - committed);
        await waitFor(`job ${id} completed`, async () => (await status(db, id)) === "Completed");
      }
      const worst = Math.max(...latencies);
      assert.ok(worst < 100, `every job starts within 100 ms of its commit: ${latencies}`);
    } finally {
      await running.stop();
      sub.close();
      await reader;
    }
  },
);

dbTest("Consumer runs 500 jobs inserted in one transaction back to back", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const running = await startConsumer(db, ctx, { pollIntervalMs: 30_000 });
  try {
    await waitFor("the lock", () => running.lock.held);
    await db
      .sql`insert into ingestion_jobs (source_path) select ${path} from generate_series(1, 500)`;
    await waitFor(
      "500 completed jobs",
      async () => {
        const [{ count }] = await db.sql`
        select count(*)::int from ingestion_jobs where status = 'Completed'`;
        return count === 500;
      },
      60_000,
      50,
    );
  } finally {
    await running.stop();
  }
});

dbTest(
  "Consumer catches up after its listener's backend is killed and is woken by NOTIFY again",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const applicationName = `test-listener-${crypto.randomUUID().slice(0, 8)}`;
    const running = await startConsumer(db, ctx, { pollIntervalMs: 30_000, applicationName });
    try {
      await waitFor("the lock", () => running.lock.held);
      const listenerPid = async () => {
        const rows = await db.sql<{ pid: number }[]>`
        select pid from pg_stat_activity where application_name = ${applicationName}`;
        return rows[0]?.pid;
      };
      const before = await waitFor("the listener backend", listenerPid);
      await db.sql`select pg_terminate_backend(${before})`;
      const duringGap = await enqueueBook(db, path);
      await waitFor(
        "the job inserted during the gap",
        async () => (await status(db, duringGap)) === "Completed",
        5000,
      );
      const after = await waitFor("a new listener backend", listenerPid);
      assert.notEqual(after, before);
      const later = await enqueueBook(db, path);
      const t0 = performance.now();
      await waitFor("the later job", async () => (await status(db, later)) === "Completed", 3000);
      assert.ok(performance.now() - t0 < 3000);
    } finally {
      await running.stop();
    }
  },
);
