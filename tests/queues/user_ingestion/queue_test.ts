/**
 * The user ingestion queue's verbs on real Postgres: claim, stale re-pick, recover,
 * recoverOrphans, giveBack, run (Ready + enrichment Pending, reader messages, DRM), retry.
 *
 * @module
 */
import assert from "node:assert/strict";
import { connect } from "../../../lib/db.ts";
import { closeExtractor } from "../../../books/extract.ts";
import * as userIngestion from "../../../queues/user_ingestion/mod.ts";
import * as userIngestionJobs from "../../../queues/user_ingestion/jobs.ts";
import {
  INTERRUPTED_MESSAGE,
  MAX_ATTEMPTS,
  PARSE_FAILED_MESSAGE,
  userBookDir,
} from "../../../queues/user_ingestion/mod.ts";
import { dbTest, type TestDb, waitFor } from "../../_db.ts";
import { SMALL_BOOK } from "../../_ingestion.ts";
import {
  AES128,
  bookRow,
  epubBytes,
  insertUserBook,
  userIngestionContext,
  userJobRow,
} from "../../_user_books.ts";

async function claimed(db: TestDb, source: string, text: string | Uint8Array = SMALL_BOOK) {
  const ctx = await userIngestionContext(db);
  if (typeof text === "string") await Deno.writeTextFile(`${ctx.storageDir}/${source}`, text);
  else await Deno.writeFile(`${ctx.storageDir}/${source}`, text);
  const ids = await insertUserBook(db, source);
  const job = await userIngestion.claim(ctx);
  assert.ok(job);
  assert.equal(job.id, ids.jobId);
  return { ctx, job, ...ids };
}

async function makeStale(db: TestDb, jobId: string, attempts: number): Promise<void> {
  await db.sql`
    update user_ingestion_jobs
    set status = 'Processing', attempt_count = ${attempts}, claimed_by = ${crypto.randomUUID()},
        claimed_at = now() - interval '3 minutes'
    where id = ${jobId}`;
}

dbTest("claim() takes a Queued job: Processing, attempt 1, this boot's id", async (db) => {
  const { ctx, job, jobId } = await claimed(db, "a.txt");
  const row = await userJobRow(db, jobId);
  assert.deepEqual([row.status, row.attempt_count, row.claimed_by], [
    "Processing",
    1,
    ctx.bootId,
  ]);
  assert.equal(job.attempt_count, 1);
  assert.equal(await userIngestion.claim(ctx), null);
});

dbTest(
  "run() saves the chapters, the book Ready and its enrichment Pending, and NOTIFYs user_books",
  async (db) => {
    const { ctx, job, bookId, jobId } = await claimed(db, "a.txt");
    const listener = connect(db.url, { schema: db.schema, applicationName: "t-l", max: 1 });
    const notified = Promise.withResolvers<void>();
    await listener.listen(`${db.schema}.user_books`, () => notified.resolve());
    try {
      await userIngestion.run(ctx, job, new AbortController().signal);
      const book = await bookRow(db, bookId);
      assert.deepEqual([book.status, book.error, book.title, book.metadata_enrichment_status], [
        "Ready",
        null,
        "The Test Book",
        "Pending",
      ]);
      assert.equal((await userJobRow(db, jobId)).status, "Completed");
      const [{ n }] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from user_chapters where user_book_id = ${bookId}`;
      assert.equal(n, 3);
      const files = [...Deno.readDirSync(userBookDir(ctx.storageDir, bookId))].map((e) => e.name);
      assert.deepEqual(files.sort(), ["1.html", "2.html", "3.html"]);
      await waitFor("a NOTIFY on <schema>.user_books", () => notified.promise.then(() => true));
    } finally {
      await listener.end({ timeout: 1 });
      closeExtractor();
    }
  },
);

dbTest(
  "run() fails an unreadable file at once: the reader sees the 'corrupted' message",
  async (db) => {
    const { ctx, job, bookId, jobId } = await claimed(db, "broken.epub", "not a zip at all");
    await userIngestion.run(ctx, job, new AbortController().signal);
    closeExtractor();
    const row = await userJobRow(db, jobId);
    assert.equal(row.status, "Failed");
    assert.match(row.error ?? "", /not a valid ZIP archive/);
    const book = await bookRow(db, bookId);
    assert.deepEqual([book.status, book.error], ["Failed", PARSE_FAILED_MESSAGE]);
    assert.equal(
      PARSE_FAILED_MESSAGE,
      "Could not read this file. It may be corrupted or password-protected.",
    );
  },
);

dbTest("run() treats a DRM-encrypted EPUB as a parse failure", async (db) => {
  const { ctx, job, bookId, jobId } = await claimed(
    db,
    "drm.epub",
    epubBytes({ algorithm: AES128 }),
  );
  await userIngestion.run(ctx, job, new AbortController().signal);
  closeExtractor();
  assert.match((await userJobRow(db, jobId)).error ?? "", /encrypted \(DRM\)/);
  const book = await bookRow(db, bookId);
  assert.deepEqual([book.status, book.error], ["Failed", PARSE_FAILED_MESSAGE]);
});

dbTest("run() reads an EPUB whose only encryption is font obfuscation", async (db) => {
  const { ctx, job, bookId } = await claimed(
    db,
    "fonts.epub",
    epubBytes({ algorithm: "http://www.idpf.org/2008/embedding", uri: "OEBPS/font.otf" }),
  );
  await userIngestion.run(ctx, job, new AbortController().signal);
  closeExtractor();
  const book = await bookRow(db, bookId);
  assert.deepEqual([book.status, book.title], ["Ready", "The Lighthouse"]);
});

dbTest(
  "run() aborted for shutdown rejects with the reason; giveBack() → Queued, attempt un-counted, book Processing",
  async (db) => {
    const { ctx, job, bookId, jobId } = await claimed(db, "a.txt");
    const abort = new AbortController();
    abort.abort(new Error("Shutting down"));
    await assert.rejects(userIngestion.run(ctx, job, abort.signal), /Shutting down/);
    assert.equal(await userIngestion.giveBack(ctx, job), true);
    const row = await userJobRow(db, jobId);
    assert.deepEqual([row.status, row.attempt_count, row.error, row.claimed_by], [
      "Queued",
      0,
      null,
      null,
    ]);
    const book = await bookRow(db, bookId);
    assert.deepEqual([book.status, book.error], ["Processing", null]);
    // The fence: a second give-back matches nothing and changes nothing.
    assert.equal(await userIngestion.giveBack(ctx, job), false);
    assert.equal((await userJobRow(db, jobId)).attempt_count, 0);
  },
);

dbTest(
  "run() timed out at the cap fails with the message that does not blame the file",
  async (db) => {
    const { ctx, bookId, jobId } = await claimed(db, "a.txt");
    await db
      .sql`update user_ingestion_jobs set attempt_count = ${MAX_ATTEMPTS} where id = ${jobId}`;
    const job = { ...(await userJobRow(db, jobId)), claimed_by: ctx.bootId };
    const timeout = new AbortController();
    timeout.abort(new DOMException("Run exceeded 10 ms", "TimeoutError"));
    await userIngestion.run(ctx, job, timeout.signal);
    assert.equal((await userJobRow(db, jobId)).status, "Failed");
    const book = await bookRow(db, bookId);
    assert.deepEqual([book.status, book.error], ["Failed", INTERRUPTED_MESSAGE]);
  },
);

dbTest("run() timed out under the cap requeues the job; the book stays Processing", async (db) => {
  const { ctx, job, bookId, jobId } = await claimed(db, "a.txt");
  const timeout = new AbortController();
  timeout.abort(new DOMException("Run exceeded 10 ms", "TimeoutError"));
  await userIngestion.run(ctx, job, timeout.signal);
  const row = await userJobRow(db, jobId);
  assert.deepEqual([row.status, row.attempt_count], ["Queued", 1]);
  assert.match(row.error ?? "", /attempt 1 of 3 failed, will retry/);
  assert.equal((await bookRow(db, bookId)).status, "Processing");
});

dbTest(
  "claim() re-picks a job stale for 2 min under the cap, never a fresh one nor one at the cap",
  async (db) => {
    const ctx = await userIngestionContext(db);
    const stale = await insertUserBook(db, "a.txt");
    const fresh = await insertUserBook(db, "b.txt");
    await makeStale(db, stale.jobId, 1);
    await db.sql`
    update user_ingestion_jobs
    set status = 'Processing', attempt_count = 1, claimed_by = ${crypto.randomUUID()},
        claimed_at = now() - interval '90 seconds'
    where id = ${fresh.jobId}`;
    const exhausted = await insertUserBook(db, "c.txt");
    await makeStale(db, exhausted.jobId, MAX_ATTEMPTS);
    const job = await userIngestion.claim(ctx);
    assert.equal(job?.id, stale.jobId);
    assert.equal(job?.attempt_count, 2);
    assert.equal(await userIngestion.claim(ctx), null);
  },
);

dbTest(
  "recover() fails a stale job at the cap, the book with the non-blaming message",
  async (db) => {
    const ctx = await userIngestionContext(db);
    const atCap = await insertUserBook(db, "a.txt");
    const underCap = await insertUserBook(db, "b.txt");
    await makeStale(db, atCap.jobId, MAX_ATTEMPTS);
    await makeStale(db, underCap.jobId, MAX_ATTEMPTS - 1);
    await userIngestion.recover(ctx, new AbortController().signal);
    const failed = await userJobRow(db, atCap.jobId);
    assert.equal(failed.status, "Failed");
    assert.match(failed.error ?? "", /attempts exhausted \(3 of 3\)/);
    const book = await bookRow(db, atCap.bookId);
    assert.deepEqual([book.status, book.error], ["Failed", INTERRUPTED_MESSAGE]);
    // Under the cap a stale row is the claim's to re-pick.
    assert.equal((await userJobRow(db, underCap.jobId)).status, "Processing");
    assert.equal(await userIngestion.claim(ctx).then((j) => j?.id), underCap.jobId);
  },
);

dbTest(
  "recoverOrphans() gives back this boot's rows, requeues others' with the attempt spent, fails them at the cap",
  async (db) => {
    const ctx = await userIngestionContext(db);
    const mine = await insertUserBook(db, "a.txt");
    const crashed = await insertUserBook(db, "b.txt");
    const exhausted = await insertUserBook(db, "c.txt");
    const waiting = await insertUserBook(db, "d.txt");
    const other = crypto.randomUUID();
    // Fresh claims: orphaned at lock acquisition whatever their age.
    await db.sql`
      update user_ingestion_jobs set status = 'Processing', attempt_count = 2,
        claimed_by = ${ctx.bootId}, claimed_at = now() where id = ${mine.jobId}`;
    await db.sql`
      update user_ingestion_jobs set status = 'Processing', attempt_count = 1,
        claimed_by = ${other}, claimed_at = now() where id = ${crashed.jobId}`;
    await db.sql`
      update user_ingestion_jobs set status = 'Processing', attempt_count = ${MAX_ATTEMPTS},
        claimed_by = ${other}, claimed_at = now() where id = ${exhausted.jobId}`;

    await userIngestion.recoverOrphans(ctx, new AbortController().signal);

    const a = await userJobRow(db, mine.jobId);
    assert.deepEqual([a.status, a.attempt_count, a.error, a.claimed_by], ["Queued", 1, null, null]);
    const b = await userJobRow(db, crashed.jobId);
    assert.deepEqual([b.status, b.attempt_count, b.claimed_by], ["Queued", 1, null]);
    assert.match(b.error ?? "", /interrupted/);
    const c = await userJobRow(db, exhausted.jobId);
    assert.deepEqual([c.status, c.attempt_count], ["Failed", MAX_ATTEMPTS]);
    const cBook = await bookRow(db, exhausted.bookId);
    assert.deepEqual([cBook.status, cBook.error], ["Failed", INTERRUPTED_MESSAGE]);
    for (const ids of [mine, crashed]) {
      assert.deepEqual(
        [(await bookRow(db, ids.bookId)).status, (await bookRow(db, ids.bookId)).error],
        ["Processing", null],
      );
    }
    const d = await userJobRow(db, waiting.jobId);
    assert.deepEqual([d.status, d.attempt_count, d.error], ["Queued", 0, null]);
  },
);

dbTest(
  "recoverOrphans() scope own gives back this boot's rows and leaves another boot's claim alone",
  async (db) => {
    const ctx = await userIngestionContext(db);
    const mine = await insertUserBook(db, "a.txt");
    const theirs = await insertUserBook(db, "b.txt");
    const other = crypto.randomUUID();
    await db.sql`
      update user_ingestion_jobs set status = 'Processing', attempt_count = 2,
        claimed_by = ${ctx.bootId}, claimed_at = now() where id = ${mine.jobId}`;
    await db.sql`
      update user_ingestion_jobs set status = 'Processing', attempt_count = ${MAX_ATTEMPTS},
        claimed_by = ${other}, claimed_at = now() where id = ${theirs.jobId}`;
    await userIngestion.recoverOrphans(ctx, new AbortController().signal, "own");
    const a = await userJobRow(db, mine.jobId);
    assert.deepEqual([a.status, a.attempt_count, a.claimed_by], ["Queued", 1, null]);
    const b = await userJobRow(db, theirs.jobId);
    assert.deepEqual([b.status, b.attempt_count, b.claimed_by], [
      "Processing",
      MAX_ATTEMPTS,
      other,
    ]);
  },
);

dbTest(
  "retry() requeues only a Failed job and its book, resetting attempts and error",
  async (db) => {
    const { ctx, job, bookId, jobId } = await claimed(db, "broken.epub", "not a zip");
    assert.equal(
      await userIngestionJobs.retry(ctx, jobId),
      null,
      "a Processing job is not retried",
    );
    await userIngestion.run(ctx, job, new AbortController().signal);
    closeExtractor();
    const retried = await userIngestionJobs.retry(ctx, jobId);
    assert.deepEqual([retried?.status, retried?.attempt_count, retried?.error], [
      "Queued",
      0,
      null,
    ]);
    const book = await bookRow(db, bookId);
    assert.deepEqual([book.status, book.error], ["Processing", null]);
    assert.equal(await userIngestionJobs.retry(ctx, jobId), null, "a Queued job is not retried");
  },
);

dbTest("stats() counts every status", async (db) => {
  const { ctx } = await claimed(db, "a.txt");
  await insertUserBook(db, "b.txt");
  const stats = await userIngestionJobs.stats(ctx.sql);
  assert.deepEqual(stats.byStatus, { Queued: 1, Processing: 1, Completed: 0, Failed: 0 });
  assert.equal(typeof stats.oldestRunnableAgeS, "number");
});

dbTest(
  "run() that fails on a file-system error stores the error with paths relative to STORAGE_DIR, never the absolute one",
  async (db) => {
    const { ctx, job, jobId } = await claimed(db, "a.txt");
    // The chapter assets cannot be written: user-books is a file, not a folder.
    await Deno.writeTextFile(`${ctx.storageDir}/user-books`, "not a folder");
    await userIngestion.run(ctx, job, new AbortController().signal);
    const row = await userJobRow(db, jobId);
    assert.ok(row.error, JSON.stringify(row));
    assert.match(row.error, /user-books/);
    for (const root of [ctx.storageDir, await Deno.realPath(ctx.storageDir)]) {
      assert.ok(!row.error.includes(root), `absolute STORAGE_DIR in: ${row.error}`);
    }
  },
);
