/**
 * Every wake source of a queue (STYLE.md §5): NOTIFY, each (re)listen, the poll timer and the end
 * of a job. Each test leaves its source the only one that can start the work it waits for.
 *
 * @module
 */
import assert from "node:assert/strict";
import { connect } from "../lib/db.ts";
import { listenForWakes } from "../lib/listener.ts";
import { createLogger } from "../lib/log.ts";
import { Wake } from "../lib/wake.ts";
import { dbTest, waitFor } from "./_db.ts";
import { ingestionContext, SMALL_BOOK, startConsumer, writeSource } from "./_ingestion.ts";

dbTest(
  "listenForWakes() wakes on the first listen, on NOTIFY, and on every re-listen",
  async (db) => {
    const wake = new Wake("ingestion");
    const applicationName = `${db.applicationName}-listener`;
    const listenerSql = connect(db.url, { schema: db.schema, applicationName, max: 1 });
    try {
      await listenForWakes(
        listenerSql,
        `${db.schema}.ingestion_jobs`,
        wake,
        createLogger("silent"),
      );
      assert.equal(await wake.wait(AbortSignal.timeout(3000)), true, "the first listen wakes");
      await db.sql`insert into ingestion_jobs (source_path) values ('a.txt')`;
      assert.equal(await wake.wait(AbortSignal.timeout(3000)), true, "a NOTIFY wakes");
      // A NOTIFY sent while the listener reconnects is lost: the re-listen itself must wake.
      const [{ pid }] = await db.sql<{ pid: number }[]>`
      select pid from pg_stat_activity where application_name = ${applicationName}`;
      await db.sql`select pg_terminate_backend(${pid})`;
      assert.equal(await wake.wait(AbortSignal.timeout(5000)), true, "the re-listen wakes");
    } finally {
      await listenerSql.end({ timeout: 1 });
    }
  },
);

dbTest("Consumer polls: a job that becomes due with no NOTIFY still starts", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const running = await startConsumer(db, ctx, { pollIntervalMs: 200 });
  try {
    await waitFor("the lock", () => running.lock.held);
    await running.listenerSql.end({ timeout: 1 }); // no NOTIFY, no re-listen from here on
    // Not due at its insert: neither its NOTIFY nor a round already under way can start it.
    const [{ id }] = await db.sql<{ id: string }[]>`
      insert into ingestion_jobs (source_path, run_after)
      values (${path}, now() + interval '500 milliseconds') returning id`;
    await waitFor("the job started by a poll", async () => {
      const [row] = await db.sql`select status from ingestion_jobs where id = ${id}`;
      return row.status === "Completed";
    }, 5000);
  } finally {
    await running.stop();
  }
});

dbTest("Consumer drains: the end of each job wakes it for the next one", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const running = await startConsumer(db, ctx, { pollIntervalMs: 30_000 });
  try {
    await waitFor("the lock", () => running.lock.held);
    // One commit, one coalesced wake, three jobs: only the end of each job claims the next.
    await db
      .sql`insert into ingestion_jobs (source_path) select ${path} from generate_series(1, 3)`;
    await waitFor("three completed jobs", async () => {
      const [{ count }] = await db.sql`
        select count(*)::int from ingestion_jobs where status = 'Completed'`;
      return count === 3;
    }, 5000);
  } finally {
    await running.stop();
  }
});
