import assert from "node:assert/strict";
import { connect } from "../../../lib/db.ts";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import * as ingestionJobs from "../../../queues/ingestion/jobs.ts";
import { listAssetVersions } from "../../../books/assets.ts";
import { resolveSourcePath } from "../../../books/source_path.ts";
import { dbTest, within } from "../../_db.ts";
import {
  holdEditionsLock,
  ingestionContext,
  insertJob,
  jobRow,
  recordEvents,
  SMALL_BOOK,
  writeSource,
} from "../../_ingestion.ts";

dbTest("claim() takes each job exactly once across two sessions", async (db) => {
  const other = connect(db.url, { schema: db.schema, applicationName: "test-other", max: 2 });
  try {
    const a = await ingestionContext(db);
    const b = { ...(await ingestionContext(db)), sql: other };
    await db
      .sql`insert into ingestion_jobs (source_path) select 'x' || g from generate_series(1, 40) g`;
    const claimed: string[] = [];
    await other`select 1`; // both sessions connected before the race starts
    // In lockstep: each round both sessions claim at the same moment, so every round is a race
    // that SKIP LOCKED must settle with two different jobs.
    let [na, nb] = [0, 0];
    for (let round = 0; round < 40; round++) {
      const [ja, jb] = await Promise.all([ingestion.claim(a), ingestion.claim(b)]);
      if (ja) (claimed.push(ja.id), na++);
      if (jb) (claimed.push(jb.id), nb++);
      if (!ja && !jb) break;
    }
    assert.equal(claimed.length, 40);
    assert.equal(new Set(claimed).size, 40);
    assert.ok(na > 0 && nb > 0, `both sessions should claim some (got ${na} and ${nb})`);
    const [{ count }] = await db.sql`
      select count(*)::int from ingestion_jobs where status = 'Processing' and attempt_count = 1`;
    assert.equal(count, 40);
  } finally {
    await other.end();
  }
});

dbTest("claim() skips a row another session holds", async (db) => {
  const ctx = await ingestionContext(db);
  const first = await insertJob(db, "a.txt");
  const second = await insertJob(db, "b.txt");
  const other = connect(db.url, { schema: db.schema, applicationName: "test-holder", max: 1 });
  try {
    await other.begin(async (tx) => {
      await tx`select id from ingestion_jobs where id = ${first} for update`;
      const job = await within("a claim that must skip the locked row", ingestion.claim(ctx));
      assert.equal(job?.id, second);
    });
  } finally {
    await other.end();
  }
});

dbTest(
  "claim() re-picks a stale Processing job under the cap and counts the attempt",
  async (db) => {
    const ctx = await ingestionContext(db, { staleAfterMs: 60_000 });
    const id = await insertJob(db, "a.txt");
    const crashed = crypto.randomUUID();
    await db.sql`
    update ingestion_jobs set status = 'Processing', attempt_count = 1, claimed_by = ${crashed},
      claimed_at = now() - interval '30 seconds' where id = ${id}`;
    assert.equal(await ingestion.claim(ctx), null, "a job claimed 30 s ago is not stale yet");
    await db
      .sql`update ingestion_jobs set claimed_at = now() - interval '2 minutes' where id = ${id}`;
    const job = await ingestion.claim(ctx);
    assert.equal(job?.id, id);
    assert.equal(job?.attempt_count, 2);
    assert.equal(job?.claimed_by, ctx.bootId);
  },
);

dbTest("recover() fails a stale job at the attempts cap; claim() leaves it alone", async (db) => {
  const ctx = await ingestionContext(db, { staleAfterMs: 60_000 });
  const id = await insertJob(db, "a.txt");
  await db.sql`
    update ingestion_jobs set status = 'Processing', attempt_count = ${ingestion.MAX_ATTEMPTS},
      claimed_by = ${crypto.randomUUID()}, claimed_at = now() - interval '2 minutes'
    where id = ${id}`;
  assert.equal(await ingestion.claim(ctx), null);
  const rec = recordEvents(ctx.events);
  await ingestion.recover(ctx, new AbortController().signal);
  await rec.stop();
  const row = await jobRow(db, id);
  assert.equal(row.status, "Failed");
  assert.match(row.error ?? "", /attempts exhausted \(3 of 3\)/);
  assert.equal(row.claimed_by, null);
  assert.deepEqual(rec.events.map((e) => [e.id, e.transition, e.status]), [[
    id,
    "recovered",
    "Failed",
  ]]);
});

dbTest("giveBack() returns the job Queued with the attempt un-counted and no error", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, "a.txt");
  await db.sql`update ingestion_jobs set error = 'attempt 1 of 3 failed' where id = ${id}`;
  const job = await ingestion.claim(ctx);
  assert.ok(job);
  assert.equal(await ingestion.giveBack(ctx, job), true);
  const row = await jobRow(db, id);
  assert.equal(row.status, "Queued");
  assert.equal(row.attempt_count, 0);
  assert.equal(row.error, null);
  assert.equal(row.claimed_by, null);
});

dbTest("giveBack() changes nothing when the row is no longer as claimed", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, "a.txt");
  const job = await ingestion.claim(ctx);
  assert.ok(job);
  // Another boot re-picked it (stale): same status, different owner, one more attempt.
  await db.sql`
    update ingestion_jobs set claimed_by = ${crypto.randomUUID()}, attempt_count = 2
    where id = ${id}`;
  const before = await jobRow(db, id);
  assert.equal(await ingestion.giveBack(ctx, job), false);
  assert.deepEqual(await jobRow(db, id), before);
  // And a job that already completed stays completed.
  await db.sql`update ingestion_jobs set status = 'Completed', claimed_by = ${ctx.bootId},
    attempt_count = 1 where id = ${id}`;
  assert.equal(await ingestion.giveBack(ctx, job), false);
  assert.equal((await jobRow(db, id)).status, "Completed");
});

dbTest(
  "run() saves the edition and chapters, completes the job, writes one asset version",
  async (db) => {
    const ctx = await ingestionContext(db);
    const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
    const rec = recordEvents(ctx.events);
    const job = await ingestion.claim(ctx);
    assert.ok(job);
    await ingestion.run(ctx, job, new AbortController().signal);
    await rec.stop();
    const row = await jobRow(db, id);
    assert.equal(row.status, "Completed", row.error ?? "");
    assert.ok(row.edition_id);
    const [edition] = await db.sql`select * from editions where id = ${row.edition_id}`;
    assert.equal(edition.title, "The Test Book");
    assert.equal(edition.author, "Ada Tester");
    const chapters = await db.sql`
    select position, title from chapters where edition_id = ${row.edition_id} order by position`;
    assert.equal(chapters.length, 3);
    assert.deepEqual(await listAssetVersions(ctx.storageDir, row.edition_id), ["v1"]);
    const files = [...Deno.readDirSync(`${ctx.storageDir}/editions/${row.edition_id}/v1`)];
    assert.equal(files.length, 3);
    assert.deepEqual(rec.events.map((e) => e.transition), ["claimed", "completed"]);
  },
);

dbTest("run() re-ingesting an edition leaves exactly one asset version on disk", async (db) => {
  const ctx = await ingestionContext(db);
  const first = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  await ingestion.run(ctx, (await ingestion.claim(ctx))!, new AbortController().signal);
  const editionId = (await jobRow(db, first)).edition_id!;
  const shorter = SMALL_BOOK.split("CHAPTER III")[0];
  await writeSource(ctx.storageDir, "book2.txt", shorter);
  const second = await ingestionJobs.enqueue(ctx, "book2.txt", editionId);
  await ingestion.run(ctx, (await ingestion.claim(ctx))!, new AbortController().signal);
  assert.equal((await jobRow(db, second.id)).status, "Completed");
  const [edition] = await db.sql`select asset_version from editions where id = ${editionId}`;
  assert.equal(edition.asset_version, 2);
  assert.deepEqual(await listAssetVersions(ctx.storageDir, editionId), ["v2"]);
  const files = [...Deno.readDirSync(`${ctx.storageDir}/editions/${editionId}/v2`)];
  const [{ count }] = await db
    .sql`select count(*)::int from chapters where edition_id = ${editionId}`;
  assert.equal(files.length, count);
  assert.equal(count, 2);
});

dbTest("run() fails an unreadable file at once with a reason about the file", async (db) => {
  const ctx = await ingestionContext(db);
  await Deno.writeFile(`${ctx.storageDir}/broken.epub`, new Uint8Array([0x50, 0x4b, 3, 4, 1, 2]));
  const id = await insertJob(db, "broken.epub");
  await ingestion.run(ctx, (await ingestion.claim(ctx))!, new AbortController().signal);
  const row = await jobRow(db, id);
  assert.equal(row.status, "Failed");
  assert.equal(row.attempt_count, 1);
  assert.match(row.error ?? "", /broken\.epub/);
  assert.doesNotMatch(row.error ?? "", /interrupted/);
});

dbTest("run() retries a transient fault under the cap, then fails at the cap", async (db) => {
  // A transient read fault (EIO): not the file's fault, so retried after a delay under the cap.
  const ctx = {
    ...(await ingestionContext(db)),
    extract: () => Promise.reject(Object.assign(new Error("read failed: EIO"), { code: "EIO" })),
  };
  const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  for (let attempt = 1; attempt <= ingestion.MAX_ATTEMPTS; attempt++) {
    await db.sql`update ingestion_jobs set run_after = now() where id = ${id}`;
    const job = await ingestion.claim(ctx);
    assert.equal(job?.attempt_count, attempt);
    await ingestion.run(ctx, job!, new AbortController().signal);
    const row = await jobRow(db, id);
    if (attempt < ingestion.MAX_ATTEMPTS) {
      assert.equal(row.status, "Queued");
      assert.equal(row.error, `attempt ${attempt} of 3 failed, will retry: read failed: EIO`);
      assert.ok(row.run_after.getTime() > Date.now(), "a retry waits before it runs again");
    } else {
      assert.equal(row.status, "Failed");
      assert.equal(row.error, "attempts exhausted (3 of 3): read failed: EIO");
    }
  }
});

dbTest(
  "run() retries a connection lost mid-save under the cap, then fails at the cap",
  async (db) => {
    const ctx = await ingestionContext(db);
    const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
    for (let attempt = 1; attempt <= ingestion.MAX_ATTEMPTS; attempt++) {
      await db.sql`update ingestion_jobs set run_after = now() where id = ${id}`;
      const job = await ingestion.claim(ctx);
      assert.equal(job?.attempt_count, attempt);
      // A real connection fault mid-save: the save blocks on a table lock held elsewhere, and its
      // backend is terminated while it waits. The terminate waits for that backend to exit: a
      // backend still exiting is still listed as waiting on the lock, and the next attempt's
      // lookup then found it instead of its own save (a deadlock at teardown, 1 run in 25).
      const lock = await holdEditionsLock(db);
      const running = ingestion.run(ctx, job!, new AbortController().signal);
      running.catch(() => {}); // awaited below, where a rejection fails the test by its name
      try {
        const [{ exited }] = await db.sql<{ exited: boolean }[]>`
          select pg_terminate_backend(${await lock.blocked()}, 10000) as exited`;
        assert.ok(exited, "the save's backend exited");
      } finally {
        await lock.release();
      }
      await running;
      const row = await jobRow(db, id);
      // How the driver words the lost backend depends on where the socket stood when it died; the
      // save without resources runs on a reserved connection, where it often reads ECONNRESET.
      const fault =
        "(write CONNECTION_CLOSED|terminating connection|read ECONNRESET|This socket has been ended by the other party)";
      if (attempt < ingestion.MAX_ATTEMPTS) {
        assert.equal(row.status, "Queued");
        assert.match(
          row.error ?? "",
          new RegExp(`attempt ${attempt} of 3 failed, will retry: ${fault}`),
        );
        assert.ok(row.run_after.getTime() > Date.now(), "a retry waits before it runs again");
      } else {
        assert.equal(row.status, "Failed");
        assert.match(row.error ?? "", new RegExp(`attempts exhausted \\(3 of 3\\): ${fault}`));
      }
      assert.equal(row.edition_id, null, "nothing of the failed save was kept");
    }
  },
);

dbTest(
  "run() fails a source that escapes STORAGE_DIR through a symlink, without reading it",
  async (db) => {
    const ctx = await ingestionContext(db);
    const outside = await Deno.makeTempFile({ suffix: ".txt" });
    await Deno.writeTextFile(outside, SMALL_BOOK);
    await Deno.symlink(outside, `${ctx.storageDir}/escape.txt`);
    const id = await insertJob(db, "escape.txt");
    await ingestion.run(ctx, (await ingestion.claim(ctx))!, new AbortController().signal);
    const row = await jobRow(db, id);
    assert.equal(row.status, "Failed");
    assert.match(row.error ?? "", /resolves outside STORAGE_DIR through a symlink/);
    const [{ count }] = await db.sql`select count(*)::int from editions`;
    assert.equal(count, 0);
  },
);

dbTest("run() that lost its claim commits nothing", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  const job = await ingestion.claim(ctx);
  assert.ok(job);
  // Shutdown gave it back while the run was still going.
  assert.equal(await ingestion.giveBack(ctx, job), true);
  const rec = recordEvents(ctx.events);
  await ingestion.run(ctx, job, new AbortController().signal);
  await rec.stop();
  const row = await jobRow(db, id);
  assert.equal(row.status, "Queued");
  assert.equal(row.edition_id, null);
  const [{ count }] = await db.sql`select count(*)::int from editions`;
  assert.equal(count, 0);
  assert.deepEqual(rec.events, [], "a rolled-back completion publishes nothing");
});

dbTest("run() rejects with the abort reason and saves nothing when aborted", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  const job = await ingestion.claim(ctx);
  const abort = new AbortController();
  const reason = new Error("Shutting down");
  abort.abort(reason);
  await assert.rejects(ingestion.run(ctx, job!, abort.signal), (err) => err === reason);
  const row = await jobRow(db, id);
  assert.equal(row.status, "Processing");
  assert.equal(row.edition_id, null);
});

dbTest("retry() requeues only a Failed job, resetting attempts and error", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, "a.txt");
  await db.sql`update ingestion_jobs set status = 'Failed', attempt_count = 3, error = 'bad'
    where id = ${id}`;
  const row = await ingestionJobs.retry(ctx, id);
  assert.equal(row?.status, "Queued");
  assert.equal(row?.attempt_count, 0);
  assert.equal(row?.error, null);
  assert.equal(await ingestionJobs.retry(ctx, id), null, "a Queued job cannot be retried");
});

Deno.test("resolveSourcePath() refuses paths outside the storage root", () => {
  for (const bad of ["../etc/passwd", "/etc/passwd", "a/../../b", "", ".", "a\0b"]) {
    assert.throws(() => resolveSourcePath("/srv/storage", bad), RangeError, bad);
  }
  assert.equal(resolveSourcePath("/srv/storage", "a/./b.txt"), "a/b.txt");
  assert.equal(resolveSourcePath("/srv/storage", "..a.txt"), "..a.txt");
  assert.equal(resolveSourcePath("/srv/storage", "/srv/storage/a.txt"), "a.txt");
});

dbTest(
  "recover() rewrites assets whose post-commit write was cut short, from the database",
  async (db) => {
    const ctx = await ingestionContext(db);
    const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
    await ingestion.run(ctx, (await ingestion.claim(ctx))!, new AbortController().signal);
    const editionId = (await jobRow(db, id)).edition_id!;
    const [written] = await db.sql`select asset_version, assets_version from editions`;
    assert.deepEqual([written.asset_version, written.assets_version], [1, 1]);
    // The process died between the commit and the end of the asset write.
    await Deno.remove(`${ctx.storageDir}/editions/${editionId}`, { recursive: true });
    await Deno.mkdir(`${ctx.storageDir}/editions/${editionId}/.v1-partial`, { recursive: true });
    await db.sql`update editions set assets_version = 0`;
    await ingestion.recover(ctx, new AbortController().signal);
    assert.deepEqual(await listAssetVersions(ctx.storageDir, editionId), ["v1"]);
    const files = [...Deno.readDirSync(`${ctx.storageDir}/editions/${editionId}/v1`)].map((f) =>
      f.name
    );
    assert.deepEqual(files.sort(), ["1.html", "2.html", "3.html"]);
    const html = await Deno.readTextFile(`${ctx.storageDir}/editions/${editionId}/v1/2.html`);
    const [chapter] = await db
      .sql`select html from chapters where edition_id = ${editionId} and position = 2`;
    assert.equal(html, chapter.html);
    const [after] = await db.sql`select assets_version from editions`;
    assert.equal(after.assets_version, 1);
  },
);

dbTest("run() aborted during a slow save cancels the statement and commits nothing", async (db) => {
  const ctx = await ingestionContext(db);
  const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
  const job = await ingestion.claim(ctx);
  const lock = await holdEditionsLock(db);
  try {
    const abort = new AbortController();
    const running = ingestion.run(ctx, job!, abort.signal);
    await lock.blocked();
    const reason = new Error("Shutting down");
    const t0 = performance.now();
    abort.abort(reason);
    // The lock is only released below: a save the abort does not cancel would wait forever.
    await assert.rejects(
      within("the aborted save to end", running, 10_000),
      (err) => err === reason,
    );
    assert.ok(performance.now() - t0 < 1000, "the blocked statement was cancelled");
  } finally {
    await lock.release();
  }
  const row = await jobRow(db, id);
  assert.deepEqual([row.status, row.edition_id], ["Processing", null]);
  assert.equal(await ingestion.giveBack(ctx, job!), true, "the row lock is free for the give-back");
});

dbTest(
  "recover() backs off an asset repair that fails instead of retrying it on every wake",
  async (db) => {
    const ctx = await ingestionContext(db);
    const id = await insertJob(db, await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK));
    await ingestion.run(ctx, (await ingestion.claim(ctx))!, new AbortController().signal);
    const editionId = (await jobRow(db, id)).edition_id!;
    // The edition's directory is now a plain file: every write under it fails.
    await Deno.remove(`${ctx.storageDir}/editions/${editionId}`, { recursive: true });
    await Deno.writeTextFile(`${ctx.storageDir}/editions/${editionId}`, "not a directory");
    await db.sql`update editions set assets_version = 0`;
    await ingestion.recover(ctx, new AbortController().signal);
    const [failed] = await db.sql`
    select assets_version, assets_repair_after > now() + interval '50 seconds' as backing_off
    from editions`;
    assert.deepEqual([failed.assets_version, failed.backing_off], [0, true]);
    // Fixed, but not due yet: nothing is tried; once due, the repair succeeds.
    await Deno.remove(`${ctx.storageDir}/editions/${editionId}`);
    await ingestion.recover(ctx, new AbortController().signal);
    assert.deepEqual(await listAssetVersions(ctx.storageDir, editionId), []);
    await db.sql`update editions set assets_repair_after = now()`;
    await ingestion.recover(ctx, new AbortController().signal);
    assert.deepEqual(await listAssetVersions(ctx.storageDir, editionId), ["v1"]);
  },
);

dbTest(
  "stats() counts jobs by status, every status present, and the oldest runnable age",
  async (db) => {
    const ctx = await ingestionContext(db);
    const empty = await ingestionJobs.stats(db.sql);
    assert.deepEqual(empty.byStatus, { Queued: 0, Processing: 0, Completed: 0, Failed: 0 });
    assert.equal(empty.oldestRunnableAgeS, null);
    await db.sql`insert into ingestion_jobs (source_path, created_at, run_after)
    values ('a.txt', now() - interval '90 seconds', now() - interval '90 seconds'),
           ('b.txt', now(), now() + interval '1 hour')`;
    await db.sql`insert into ingestion_jobs (source_path, status) values ('c.txt', 'Failed')`;
    const some = await ingestionJobs.stats(ctx.sql);
    assert.deepEqual(some.byStatus, { Queued: 2, Processing: 0, Completed: 0, Failed: 1 });
    assert.ok(some.oldestRunnableAgeS! >= 89 && some.oldestRunnableAgeS! < 120);
  },
);
