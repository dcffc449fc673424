/**
 * A hostile book against a spawned `main.ts`: an EPUB whose parse needs gigabytes, ingested from
 * storage and uploaded by a reader, fails on its first attempt with a readable reason while the
 * process, its API and its other jobs never notice; the whole process tree stays under 1 GB; and
 * SIGTERM during such an extraction kills the extraction child at once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { postJson, spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";
import { descendants, hostileEpub, normalEpub, sampleTreeRss } from "../_hostile.ts";

const auth = { authorization: `Bearer ${TEST_TOKEN}` };
/** A worker's start on a loaded machine (compile, connect, migrate) has taken over 15 s. */
const STARTUP_MS = 60_000;
const ONE_GB = 1024 * 1024 * 1024;
const TOO_COMPLEX = /the book is too complex to read: /;

async function start(db: TestDb): Promise<{ worker: WorkerProcess; dir: string; base: string }> {
  const dir = await Deno.makeTempDir({ prefix: "textstack-hostile-" });
  await Deno.mkdir(join(dir, "storage"));
  await Deno.writeFile(join(dir, "storage", "hostile.epub"), hostileEpub());
  await Deno.writeFile(join(dir, "storage", "keeper.epub"), normalEpub());
  const worker = spawnWorker(db, {
    SHUTDOWN_BUDGET_MS: "10000",
    DATA_DIR: join(dir, "data"),
    STORAGE_DIR: join(dir, "storage"),
    SITE_DIR: join(dir, "site"),
  });
  await worker.waitForLog("http listening", {}, STARTUP_MS);
  return { worker, dir, base: await worker.baseUrl() };
}

async function stop(worker: WorkerProcess, dir: string): Promise<void> {
  worker.child.kill("SIGTERM");
  const status = await worker.exited;
  await Deno.remove(dir, { recursive: true });
  assert.equal(status.code, 0, JSON.stringify(worker.logs.slice(-12)));
}

async function enqueue(base: string, path: string): Promise<string> {
  const res = await postJson(`${base}/internal/ingestion/jobs`, { source_path: path });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).id;
}

type JobRow = { status: string; attempt_count: number; error: string | null };

async function settled(db: TestDb, table: string, id: string): Promise<JobRow> {
  return await waitFor(
    `${table} ${id} settled`,
    async () => {
      const [row] = await db.sql<JobRow[]>`
      select status, attempt_count, error from ${db.sql(table)} where id = ${id}`;
      return row && (row.status === "Completed" || row.status === "Failed") ? row : null;
    },
    90_000,
    50,
  );
}

/**
 * Poll `/healthz` every 50 ms until stopped: the slowest answer, ms, and whether every one was a
 * 200. The API never stalls behind an extraction.
 */
function pollHealth(base: string): { stop(): Promise<{ slowestMs: number; allOk: boolean }> } {
  let running = true;
  let slowestMs = 0;
  let allOk = true;
  const loop = (async () => {
    while (running) {
      const startedAt = performance.now();
      const res = await fetch(`${base}/healthz`);
      await res.body?.cancel();
      allOk &&= res.status === 200;
      slowestMs = Math.max(slowestMs, performance.now() - startedAt);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { slowestMs, allOk };
    },
  };
}

dbTest(
  "main.ts: a hostile EPUB fails at its first attempt as too complex, the process and a normal book never notice",
  async (db) => {
    const { worker, dir, base } = await start(db);
    const rss = sampleTreeRss(worker.child.pid);
    const health = pollHealth(base);
    try {
      const hostile = await enqueue(base, "hostile.epub");
      const normal = await enqueue(base, "keeper.epub");

      const failed = await settled(db, "ingestion_jobs", hostile);
      assert.equal(failed.status, "Failed");
      assert.equal(failed.attempt_count, 1, "crash recovery must not run it again");
      assert.match(failed.error ?? "", TOO_COMPLEX);
      assert.match(failed.error ?? "", /hostile\.epub/);

      const done = await settled(db, "ingestion_jobs", normal);
      assert.equal(done.status, "Completed", done.error ?? "");
      const job =
        await (await fetch(`${base}/internal/ingestion/jobs/${normal}`, { headers: auth }))
          .json();
      assert.equal(job.edition.title, "The Keeper");
      assert.equal(job.edition.chapter_count, 2);

      // The same book uploaded by a reader.
      const form = new FormData();
      form.append("owner_id", "7");
      form.append("file", new Blob([hostileEpub() as BlobPart]), "nothing.epub");
      const upload = await fetch(`${base}/internal/user-books`, {
        method: "POST",
        headers: auth,
        body: form,
      });
      assert.equal(upload.status, 201, await upload.clone().text());
      const { user_book } = await upload.json();
      const [{ id: userJob }] = await db.sql<{ id: string }[]>`
      select id from user_ingestion_jobs where user_book_id = ${user_book.id}`;
      const userFailed = await settled(db, "user_ingestion_jobs", userJob);
      assert.equal(userFailed.status, "Failed");
      assert.equal(userFailed.attempt_count, 1);
      assert.match(userFailed.error ?? "", TOO_COMPLEX);
      const [book] = await db.sql<{ status: string; error: string | null }[]>`
      select status, error from user_books where id = ${user_book.id}`;
      assert.equal(book.status, "Failed");
      assert.ok((book.error ?? "").length > 0, "the reader is told why");

      // Alive, answering, ready, and never restarted its consumers.
      const { slowestMs, allOk } = await health.stop();
      assert.ok(allOk, "every /healthz answered 200");
      assert.ok(slowestMs < 2_000, `/healthz took ${slowestMs} ms at worst`);
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const status = await Promise.race([worker.exited, Promise.resolve("running" as const)]);
      assert.equal(status, "running");
      assert.equal(worker.logs.filter((l) => l.msg === "recovered").length, 0);
      const peak = rss.peak();
      assert.ok(peak < ONE_GB, `the process tree peaked at ${Math.round(peak / 2 ** 20)} MiB`);
    } finally {
      rss.stop();
      await health.stop();
      await stop(worker, dir);
    }
  },
);

dbTest(
  "main.ts: SIGTERM during a hostile extraction kills the extraction child at once and gives the job back",
  async (db) => {
    const { worker, dir, base } = await start(db);
    const id = await enqueue(base, "hostile.epub");
    // The extraction child is running once the worker has a descendant for a while.
    const childPid = await waitFor(
      "the extraction child",
      () => {
        const [pid] = descendants(worker.child.pid);
        return Promise.resolve(pid ?? null);
      },
      30_000,
      10,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(descendants(worker.child.pid).includes(childPid), "still extracting");
    const sentAt = performance.now();
    worker.child.kill("SIGTERM");
    const status = await worker.exited;
    const exitMs = performance.now() - sentAt;
    assert.equal(status.code, 0, JSON.stringify(worker.logs.slice(-12)));
    assert.ok(exitMs < 5_000, `exited ${Math.round(exitMs)} ms after SIGTERM`);
    // Killed with the worker: gone, or a zombie waiting for whoever reaps orphans here (a
    // container's PID 1 may never), within a moment of the exit.
    const ended = async () => {
      const stat = await Deno.readTextFile(`/proc/${childPid}/stat`).catch(() => null);
      return stat === null || /^\d+ \(.*\) Z /.test(stat);
    };
    const gone = await waitFor("the extraction child to end", ended, 2_000).catch(() => false);
    assert.ok(gone, `extraction child ${childPid} outlived the worker`);
    const [row] = await db.sql<JobRow[]>`
    select status, attempt_count, error from ingestion_jobs where id = ${id}`;
    assert.deepEqual(row, { status: "Queued", attempt_count: 0, error: null });
    await Deno.remove(dir, { recursive: true });
  },
);
