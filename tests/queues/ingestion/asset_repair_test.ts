/**
 * The asset repair inside the ingestion queue's `recover` ("bound it by time and
 * keep its errors from blocking claims"), on real PostgreSQL and a real storage directory: a
 * repair slowed by a table lock held in another session stops at `REPAIR_BUDGET_MS`, and a repair
 * the database refuses leaves the consumer claiming and completing jobs.
 */
import assert from "node:assert/strict";
import { connect } from "../../../lib/db.ts";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import { REPAIR_BUDGET_MS } from "../../../queues/ingestion/_assets.ts";
import { dbTest, type TestDb, waitFor, within } from "../../_db.ts";
import {
  ingestionContext,
  insertJob,
  jobRow,
  SMALL_BOOK,
  spyLog,
  startConsumer,
  writeSource,
} from "../../_ingestion.ts";
import { insertEdition } from "../../_host.ts";

/** `count` editions whose saved asset version (1) was never written to disk. */
async function laggingEditions(db: TestDb, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = await insertEdition(db.sql, `Lagging ${i}`);
    await db.sql`update editions set asset_version = 1, assets_version = 0 where id = ${id}`;
    ids.push(id);
  }
  return ids;
}

async function behind(db: TestDb): Promise<string[]> {
  return (await db.sql<{ id: string }[]>`
    select id from editions where assets_version <> asset_version order by id`).map((r) => r.id);
}

dbTest(
  "recover() stops the asset repair at REPAIR_BUDGET_MS, backs nothing off for it, and the next wake repairs the rest",
  async (db) => {
    const base = await ingestionContext(db);
    const paused: unknown[] = [];
    const ctx = { ...base, log: spyLog(base.log, "asset repair paused at its budget", paused) };
    const ids = await laggingEditions(db, 3);
    // Slow the repair down for real: its read of the chapters waits on a lock held elsewhere
    // until the end of the check, far past the budget.
    const holder = connect(db.url, { schema: db.schema, applicationName: "test-holder", max: 1 });
    const locked = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    const holding = holder.begin(async (tx) => {
      await tx`lock table chapters in access exclusive mode`;
      locked.resolve();
      await release.promise;
    });
    try {
      await locked.promise;
      const t0 = performance.now();
      await within("recover()", ingestion.recover(ctx, new AbortController().signal), 20_000);
      const took = performance.now() - t0;
      // The held read was cancelled at the budget: recover() did not wait for the lock.
      assert.ok(
        took >= REPAIR_BUDGET_MS - 50 && took < REPAIR_BUDGET_MS + 1500,
        `recover() returned after ${Math.round(took)} ms`,
      );
      assert.deepEqual(await behind(db), ids, "nothing past the budget was repaired");
      const [{ backing_off }] = await db.sql`
        select count(*)::int as backing_off from editions where assets_repair_after is not null`;
      assert.equal(backing_off, 0, "a repair cut by the budget is not a failure");
      assert.equal(paused.length, 1, "it says it paused");
    } finally {
      release.resolve();
      await holding.catch(() => {});
      await holder.end({ timeout: 1 });
    }
    await ingestion.recover(ctx, new AbortController().signal);
    assert.deepEqual(await behind(db), []);
    for (const id of ids) {
      const html = await Deno.readTextFile(`${ctx.storageDir}/editions/${id}/v1/1.html`);
      assert.match(html, /bright <em>cold<\/em> day/);
    }
  },
);

dbTest(
  "Consumer claims and completes jobs while every asset repair fails with a database error",
  async (db) => {
    const ctx = await ingestionContext(db);
    const [stuck] = await laggingEditions(db, 1);
    // The database refuses every write to this edition (the repair's "written" mark and its
    // back-off alike), so each wake's repair throws out of repairAssets.
    await db.sql.unsafe(`
      create function refuse_edition_write() returns trigger language plpgsql as $$
      begin raise exception 'edition % is read-only (test)', old.id; end $$`);
    await db.sql.unsafe(`
      create trigger refuse_edition_write before update on editions for each row
      when (old.id = ${Number(stuck)}) execute function refuse_edition_write()`);
    const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const first = await insertJob(db, path);
    const failures: unknown[] = [];
    const running = await startConsumer(db, {
      ...ctx,
      log: spyLog(ctx.log, "asset repair failed; claiming anyway", failures),
    });
    try {
      await waitFor(
        "the first job Completed",
        async () => (await jobRow(db, first)).status === "Completed",
        20_000,
      );
      const second = await insertJob(db, path);
      await waitFor(
        "the second job Completed",
        async () => (await jobRow(db, second)).status === "Completed",
        20_000,
      );
      assert.ok(failures.length >= 1, "the repair did fail (and said so)");
      // A completed job's assets are written after its commit, then marked: wait for the mark.
      await waitFor(
        "only the refused edition still lagging",
        async () => JSON.stringify(await behind(db)) === JSON.stringify([stuck]),
        10_000,
      );
      assert.deepEqual(await behind(db), [stuck], "only the refused edition still lags");
    } finally {
      await running.stop();
    }
  },
);
