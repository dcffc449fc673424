/**
 * Every wake source of a queue (docs/development.md): NOTIFY, each (re)listen, the poll timer and the end
 * of a job. Each test leaves its source the only one that can start the work it waits for.
 *
 * @module
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/db.ts";
import { listenForWakes } from "../../lib/listener.ts";
import { createLogger } from "../../lib/log.ts";
import { Wake } from "../../lib/wake.ts";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { ingestionContext, startConsumer } from "../_ingestion.ts";

// A job that ends at once: its path is refused before any file is read (Failed, no extraction),
// so what these tests time is the wake, not the work.
const ENDS_AT_ONCE = "../outside.txt";

async function ended(db: TestDb, count: number): Promise<boolean> {
  const [row] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from ingestion_jobs where status = 'Failed'`;
  return row.n === count;
}

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
  const running = await startConsumer(db, ctx, { pollIntervalMs: 200 });
  try {
    await waitFor("the lock", () => running.lock.held);
    await running.listenerSql.end({ timeout: 1 }); // no NOTIFY, no re-listen from here on
    // Not due at its insert: neither its NOTIFY nor a round already under way can start it.
    await db.sql`
      insert into ingestion_jobs (source_path, run_after)
      values (${ENDS_AT_ONCE}, now() + interval '500 milliseconds')`;
    await waitFor("the job started by a poll", () => ended(db, 1), 10_000);
  } finally {
    await running.stop();
  }
});

dbTest("Consumer drains: the end of each job wakes it for the next one", async (db) => {
  const ctx = await ingestionContext(db);
  const running = await startConsumer(db, ctx, { pollIntervalMs: 30_000 });
  try {
    await waitFor("the lock", () => running.lock.held);
    // One commit, one coalesced wake, three jobs: only the end of each job claims the next.
    await db.sql`
      insert into ingestion_jobs (source_path) select ${ENDS_AT_ONCE} from generate_series(1, 3)`;
    await waitFor("three ended jobs", () => ended(db, 3), 10_000);
  } finally {
    await running.stop();
  }
});
