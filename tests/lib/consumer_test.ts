import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import * as ingestion from "../../queues/ingestion/mod.ts";
import { dbTest, waitFor, within } from "../_db.ts";
import {
  ingestionContext,
  jobRow,
  recordEvents,
  SMALL_BOOK,
  startConsumer,
  writeSource,
} from "../_ingestion.ts";
import { mkfifo, releaseFifo } from "../_fs.ts";

async function status(db: { sql: import("../../lib/db.ts").Sql }, id: string): Promise<string> {
  const [row] = await db.sql<
    { status: string }[]
  >`select status from ingestion_jobs where id = ${id}`;
  return row.status;
}

async function enqueueBook(
  db: { sql: import("../../lib/db.ts").Sql },
  path: string,
): Promise<string> {
  const [row] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path) values (${path}) returning id`;
  return row.id;
}

// A job that ends at once (its path is refused before any file is read, so it is Failed with no
// extraction): the lock tests time the lock, not the work.
const ENDS_AT_ONCE = "../outside.txt";

dbTest(
  "Consumer stands by while another holds the queue and takes over when it stops",
  async (db) => {
    const ctx1 = await ingestionContext(db);
    const ctx2 = await ingestionContext(db, { storageDir: ctx1.storageDir });
    const path = ENDS_AT_ONCE;
    const first = await startConsumer(db, ctx1, { applicationName: "test-listener-1" });
    let second;
    try {
      await waitFor("the first consumer's lock", () => first.lock.held);
      second = await startConsumer(db, ctx2, { applicationName: "test-listener-2" });
      const rec2 = recordEvents(ctx2.events);
      const id = await enqueueBook(db, path);
      await waitFor("the first job", async () => (await status(db, id)) === "Failed");
      assert.equal(second.lock.held, false);
      // Standing by, not "cannot get a connection": the lock answered, and it was taken.
      await waitFor(
        "the second consumer standing by",
        () => second!.consumer.state === "standing-by",
      );
      await first.stop();
      await waitFor("the second consumer's lock", () => second!.lock.held, 5000);
      const next = await enqueueBook(db, path);
      await waitFor(
        "the job after take-over",
        async () => (await status(db, next)) === "Failed",
      );
      await rec2.stop();
      assert.deepEqual(
        rec2.events.filter((e) => e.transition === "claimed").map((e) => e.id),
        [next],
      );
    } finally {
      await first.stop();
      await second?.stop();
    }
  },
);

dbTest(
  "Consumer stops claiming at once when its lock's session is lost, then takes the lock again",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = ENDS_AT_ONCE;
    const running = await startConsumer(db, ctx, { standbyRetryMs: 200 });
    try {
      const pid = await waitFor("the lock", () => running.lock.backendPid);
      const lost = running.lock.lost;
      await db.sql`select pg_terminate_backend(${pid})`;
      await waitFor("the lost signal", () => lost.aborted, 2000, 1);
      const newPid = await waitFor("the lock again", () => running.lock.backendPid, 5000);
      assert.notEqual(newPid, pid);
      const id = await enqueueBook(db, path);
      await waitFor(
        "a job after re-taking the lock",
        async () => (await status(db, id)) === "Failed",
      );
    } finally {
      await running.stop();
    }
  },
);

dbTest(
  "Consumer.stop() gives back a job whose run ignores its abort signal, and the late run commits nothing",
  async (db) => {
    const ctx = await ingestionContext(db);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    let lateRun: Promise<void> | undefined;
    const started = Promise.withResolvers<void>();
    const stubborn = {
      ...ingestion,
      run(c: ingestion.IngestionContext, job: ingestion.IngestionJob): Promise<void> {
        lateRun = (async () => {
          started.resolve();
          await sleep(1500); // ignores the abort signal
          await ingestion.run(c, job, new AbortController().signal);
        })();
        return lateRun;
      },
    };
    const running = await startConsumer(db, ctx, { queue: stubborn });
    const id = await enqueueBook(db, path);
    await within("the stubborn run to start", started.promise);
    const t0 = performance.now();
    await running.stop(300);
    const took = performance.now() - t0;
    assert.ok(took < 1000, `stop() took ${took} ms with a 300 ms budget`);
    let row = await jobRow(db, id);
    assert.equal(row.status, "Queued");
    assert.equal(row.attempt_count, 0);
    assert.equal(row.error, null);
    await within("the late run to end", lateRun!, 60_000);
    row = await jobRow(db, id);
    assert.equal(row.status, "Queued", "the fence kept the late run from completing");
    const [{ count }] = await db.sql`select count(*)::int from editions`;
    assert.equal(count, 0);
  },
);

dbTest("Consumer.stop() aborts a run blocked on a FIFO and gives the claim back", async (db) => {
  const ctx = await ingestionContext(db);
  const fifo = `${ctx.storageDir}/stream.txt`;
  await mkfifo(fifo);
  const running = await startConsumer(db, ctx);
  const rec = recordEvents(ctx.events);
  const id = await enqueueBook(db, "stream.txt");
  await waitFor("the claim", () => rec.events.some((e) => e.transition === "claimed"));
  const t0 = performance.now();
  await running.stop(5000);
  assert.ok(performance.now() - t0 < 1000);
  await rec.stop();
  const row = await jobRow(db, id);
  assert.deepEqual([row.status, row.attempt_count, row.error], ["Queued", 0, null]);
  assert.deepEqual(rec.events.map((e) => e.transition), ["claimed", "given_back"]);
  // Release the abandoned blocking open so the test leaks no pending op.
  await releaseFifo(fifo);
});

dbTest(
  "Consumer aborts a run past its timeout and the job is retried later, not given back",
  async (db) => {
    const ctx = await ingestionContext(db);
    const fifo = `${ctx.storageDir}/stuck.txt`;
    await mkfifo(fifo);
    const running = await startConsumer(db, ctx, { runTimeoutMs: 300 });
    try {
      const id = await enqueueBook(db, "stuck.txt");
      await waitFor("the timed-out run to be requeued", async () => {
        const row = await jobRow(db, id);
        return row.status === "Queued" && row.attempt_count === 1 ? row : null;
      }, 5000);
      const row = await jobRow(db, id);
      assert.match(row.error ?? "", /attempt 1 of 3 failed, will retry: Run exceeded 300 ms/);
      assert.ok(row.run_after.getTime() > Date.now());
    } finally {
      await running.stop();
      await releaseFifo(fifo);
    }
  },
);

dbTest("Consumer gives back at once a job whose claim committed as stop() began", async (db) => {
  const ctx = await ingestionContext(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  let stopping: Promise<void> | undefined;
  const started: { consumer?: Awaited<ReturnType<typeof startConsumer>> } = {};
  const racing = {
    ...ingestion,
    async claim(c: ingestion.IngestionContext): Promise<ingestion.IngestionJob | null> {
      const job = await ingestion.claim(c);
      if (job) stopping = started.consumer!.consumer.stop(performance.now() + 2000);
      return job;
    },
  };
  const running = started.consumer = await startConsumer(db, ctx, { queue: racing });
  await waitFor("the lock", () => running.lock.held);
  const id = await enqueueBook(db, path);
  await waitFor("the stop to begin", () => stopping !== undefined);
  await within("the stop", stopping!);
  await running.listenerSql.end({ timeout: 1 });
  const row = await jobRow(db, id);
  assert.deepEqual([row.status, row.attempt_count, row.edition_id], ["Queued", 0, null]);
});
