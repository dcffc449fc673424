import assert from "node:assert/strict";
import { connect } from "../../lib/db.ts";
import { dbTest, waitFor } from "../_db.ts";
import { spawnWorker, TEST_TOKEN } from "../_worker.ts";
import { insertEdition, snapshot, ssgJob } from "../_ssg.ts";

async function post(url: string): Promise<Response> {
  return await fetch(url, { method: "POST", headers: { authorization: `Bearer ${TEST_TOKEN}` } });
}

dbTest(
  "main.ts publishes an edition onto the site, and on SIGTERM gives a render in flight back",
  async (db) => {
    const root = await Deno.makeTempDir({ prefix: "textstack-ssg-process-" });
    const siteDir = `${root}/site`;
    const worker = spawnWorker(db, {
      STORAGE_DIR: `${root}/storage`,
      SITE_DIR: siteDir,
      SITE_URL: "https://books.example/",
    });
    // Generous: the shared test machine can be slow to start a process.
    const listening = await worker.waitForLog("http listening", {}, 60_000);
    const base = `http://127.0.0.1:${listening.port}`;
    await worker.waitForLog("consumer started", { queue: "ssg" }, 30_000);
    const id = await insertEdition(db, `${root}/storage`, {
      title: "Published Book",
      chapters: [{ title: "One", html: "<p>Hello.</p>" }],
      published: false,
    });
    const published = await (await post(`${base}/internal/editions/${id}/publish`)).json();
    await waitFor(
      "the rebuild",
      async () => (await ssgJob(db, published.rebuild.id)).status === "Completed",
      15_000,
    );
    assert.ok((await Deno.readTextFile(`${siteDir}/index.html`)).includes("Published Book"));
    const live = await snapshot(siteDir);

    // Hold the render in flight: its read of the chapters waits on this lock.
    const holder = connect(db.url, { schema: db.schema, applicationName: "test-holder", max: 1 });
    const release = Promise.withResolvers<void>();
    const locked = Promise.withResolvers<void>();
    const holding = holder.begin(async (tx) => {
      await tx`lock table chapters in access exclusive mode`;
      locked.resolve();
      await release.promise;
    });
    try {
      await locked.promise;
      const res = await post(`${base}/internal/ssg/rebuild-all`);
      assert.equal(res.status, 201);
      const job = await res.json();
      await worker.waitForLog("job claimed", { id: job.id });
      await waitFor("the render to wait on the lock", async () => {
        const rows = await db.sql`
          select 1 from pg_stat_activity
          where wait_event_type = 'Lock' and query ilike '%chapters%'
            and application_name = 'textstack'`;
        return rows.length > 0;
      }, 10_000);
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
      await worker.waitForLog("job given back", { id: job.id });
      const row = await ssgJob(db, job.id);
      assert.deepEqual([row.status, row.attempt_count, row.error, row.claimed_by], [
        "Queued",
        0,
        null,
        null,
      ]);
      assert.deepEqual(await snapshot(siteDir), live, "the live site is untouched");
      assert.equal(worker.logs.some((l) => l.level === 50), false, "no error was logged");
      // The render's read was cancelled by its signal, not abandoned at the budget.
      assert.equal(worker.logs.some((l) => String(l.msg).includes("ignored its abort")), false);
    } finally {
      release.resolve();
      await holding.catch(() => {});
      await holder.end({ timeout: 1 });
    }
  },
);
