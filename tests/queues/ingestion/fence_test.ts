/**
 * The rules on ingestion's settling writes that a lost claim and a failed commit put to the test
 * : each fence column on its own, the claim's shape, effects only after COMMIT, and a
 * cancelled run's result never saved.
 *
 * @module
 */
import assert from "node:assert/strict";
import { extractBook } from "../../../books/extract.ts";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import { dbTest, type TestDb, within } from "../../_db.ts";
import {
  ingestionContext,
  insertJob,
  jobRow,
  recordEvents,
  SMALL_BOOK,
  writeSource,
} from "../../_ingestion.ts";

type Ctx = Awaited<ReturnType<typeof ingestionContext>>;

/**
 * Three ways a run can lose its claim while it still holds the job it claimed; in each the row
 * differs from that job in one fence column only, so dropping that column lets the late write in.
 */
async function lostClaims(
  db: TestDb,
  ctx: Ctx,
): Promise<Array<{ column: string; job: ingestion.IngestionJob; id: string }>> {
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  // claimed_by: shutdown gave the claim back (the attempt un-counted) and another boot claimed it
  // again, so status and attempt_count repeat exactly (ABA).
  const aba = await insertJob(db, path);
  const first = (await ingestion.claim(ctx))!;
  assert.equal(await ingestion.giveBack(ctx, first), true);
  const other = { ...ctx, bootId: crypto.randomUUID() };
  const second = (await ingestion.claim(other))!;
  assert.deepEqual([second.id, second.attempt_count], [aba, first.attempt_count]);
  // attempt_count: the run was requeued for a retry and this same boot claimed it again.
  const retried = await insertJob(db, path);
  const stale = (await ingestion.claim(ctx))!;
  await db.sql`update ingestion_jobs set status = 'Queued', claimed_by = null, claimed_at = null
    where id = ${retried}`;
  const again = (await ingestion.claim(ctx))!;
  assert.deepEqual([again.id, again.claimed_by, again.attempt_count], [retried, ctx.bootId, 2]);
  // status: the row left Processing without anyone clearing the owner or the attempt.
  const settled = await insertJob(db, path);
  const left = (await ingestion.claim(ctx))!;
  await db.sql`update ingestion_jobs set status = 'Failed' where id = ${settled}`;
  return [
    { column: "claimed_by", job: first, id: aba },
    { column: "attempt_count", job: stale, id: retried },
    { column: "status", job: left, id: settled },
  ];
}

dbTest(
  "giveBack() matches nothing when only the status, the attempt or the owner differs from the claim",
  async (db) => {
    const ctx = await ingestionContext(db);
    for (const { column, job, id } of await lostClaims(db, ctx)) {
      const before = await jobRow(db, id);
      assert.equal(await ingestion.giveBack(ctx, job), false, `fenced on ${column}`);
      assert.deepEqual(await jobRow(db, id), before, `a miss on ${column} changes nothing`);
    }
  },
);

dbTest(
  "run() completes nothing when only the status, the attempt or the owner differs from the claim",
  async (db) => {
    const ctx = await ingestionContext(db);
    for (const { column, job, id } of await lostClaims(db, ctx)) {
      const before = await jobRow(db, id);
      await ingestion.run(ctx, job, new AbortController().signal);
      assert.deepEqual(await jobRow(db, id), before, `a miss on ${column} changes nothing`);
    }
    const [{ count }] = await db.sql`select count(*)::int from editions`;
    assert.equal(count, 0, "no late run saved an edition");
  },
);

// A deferred constraint trigger that raises at COMMIT when the job reaches `status`: the
// transaction's body succeeds and its commit fails, so anything published before the commit is
// published for a write that never happened.
async function refuseCommitOf(db: TestDb, status: "Completed" | "Queued"): Promise<void> {
  await db.sql`
    create function refuse_commit() returns trigger language plpgsql as $$
    begin
      if new.status = tg_argv[0] then raise exception 'commit refused'; end if;
      return null;
    end $$`;
  if (status === "Completed") {
    await db.sql`
      create constraint trigger refuse_commit after update on ingestion_jobs
      deferrable initially deferred for each row execute function refuse_commit('Completed')`;
  } else {
    await db.sql`
      create constraint trigger refuse_commit after update on ingestion_jobs
      deferrable initially deferred for each row execute function refuse_commit('Queued')`;
  }
}

dbTest("run() publishes completed only once its COMMIT succeeded", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  await refuseCommitOf(db, "Completed");
  const job = (await ingestion.claim(ctx))!;
  const rec = recordEvents(ctx.events);
  await ingestion.run(ctx, job, new AbortController().signal);
  await rec.stop();
  const row = await jobRow(db, id);
  assert.equal(row.status, "Queued");
  assert.match(row.error ?? "", /will retry: commit refused/);
  assert.deepEqual(rec.events.map((e) => [e.transition, e.status]), [["failed", "Queued"]]);
});

dbTest(
  "giveBack() publishes nothing when its fence misses or its COMMIT fails",
  async (db) => {
    const ctx = await ingestionContext(db);
    await insertJob(db, "a.txt");
    const job = (await ingestion.claim(ctx))!;
    const rec = recordEvents(ctx.events);
    const other = { ...job, claimed_by: crypto.randomUUID() };
    assert.equal(await ingestion.giveBack(ctx, other), false);
    await refuseCommitOf(db, "Queued");
    await assert.rejects(ingestion.giveBack(ctx, job), /commit refused/);
    await rec.stop();
    assert.deepEqual(rec.events, []);
    assert.equal((await jobRow(db, job.id)).status, "Processing");
  },
);

dbTest("claim() takes one job even when the planner re-runs its subquery per row", async (db) => {
  const ctx = await ingestionContext(db);
  await db
    .sql`insert into ingestion_jobs (source_path) select 'x' || g from generate_series(1, 5) g`;
  // The plan an `id in (select … limit 1)` claim gets on a table with other statistics: a nested
  // loop that re-runs the locking subquery for every row, each run skipping the rows this very
  // statement has just updated and so returning the next one.
  const session = await db.sql.reserve();
  try {
    await session`set enable_hashjoin = off`;
    await session`set enable_mergejoin = off`;
    await session`set enable_hashagg = off`;
    await session`set enable_sort = off`;
    await session`set enable_material = off`;
    await session`set enable_memoize = off`;
    const job = await ingestion.claim({ ...ctx, sql: session });
    assert.ok(job);
  } finally {
    session.release();
  }
  const [{ count }] = await db.sql`
    select count(*)::int from ingestion_jobs where status = 'Processing'`;
  assert.equal(count, 1, "exactly one job claimed");
});

dbTest("run() never saves a book its extractor returned after the abort", async (db) => {
  const abort = new AbortController();
  const reason = new Error("Shutting down");
  const ctx: Ctx = {
    ...(await ingestionContext(db)),
    // Like the PDF extractor of ADR-022: cancelled, it stops reading and returns what it has.
    async extract(path) {
      const book = await extractBook(path, new AbortController().signal);
      abort.abort(reason);
      return { ...book, chapters: book.chapters.slice(0, 1) };
    },
  };
  const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  const job = (await ingestion.claim(ctx))!;
  await assert.rejects(
    within("the cancelled run", ingestion.run(ctx, job, abort.signal), 60_000),
    (err) => err === reason,
  );
  const row = await jobRow(db, id);
  assert.deepEqual([row.status, row.edition_id], ["Processing", null]);
  const [{ count }] = await db.sql`select count(*)::int from editions`;
  assert.equal(count, 0);
});

dbTest(
  "recover() leaves a Processing job at the attempts cap alone while it is not stale",
  async (db) => {
    const ctx = await ingestionContext(db, { staleAfterMs: 60_000 });
    const id = await insertJob(db, "a.txt");
    await db.sql`
      update ingestion_jobs set status = 'Processing', attempt_count = ${ingestion.MAX_ATTEMPTS},
        claimed_by = ${crypto.randomUUID()}, claimed_at = now() - interval '30 seconds'
      where id = ${id}`;
    await ingestion.recover(ctx, new AbortController().signal);
    const row = await jobRow(db, id);
    assert.deepEqual([row.status, row.error], ["Processing", null]);
  },
);
