/**
 * An admin cancel of a running in-process job across two real `main.ts` instances on one
 * database: the request reaches the instance that runs the job only by NOTIFY (lib/control.ts),
 * its consumer aborts the run and settles it with the queue's fenced write, and that instance
 * goes on holding its queue. The job is a book's enrichment held open by a remote engine that
 * never answers, so the run lasts until it is aborted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dbTest, waitFor } from "../_db.ts";
import { spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";
import { CANCELLED } from "../../lib/queue.ts";
import { bookRow, ENGLISH, insertReadyBook, startChatServer } from "../_user_books.ts";

const auth = { authorization: `Bearer ${TEST_TOKEN}` };
const STARTUP_MS = 60_000;

async function readyz(base: string) {
  const res = await fetch(`${base}/readyz`);
  return { code: res.status, body: await res.json() };
}

async function stop(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  const status = await worker.exited;
  assert.equal(status.code, 0, JSON.stringify(worker.logs.slice(-12)));
}

dbTest(
  "main.ts: a cancel sent to one instance stops the enrichment another instance runs (NOTIFY), settled Failed (cancelled by admin) with its attempt; the runner keeps its queue",
  async (db) => {
    const engine = startChatServer("hold");
    const common = {
      SHUTDOWN_BUDGET_MS: "10000",
      ENRICHMENT_API_URL: engine.url,
      ENRICHMENT_API_KEY: "sk-test",
      ENRICHMENT_MODEL: "test-model",
    };
    // a runs the enrichment queue; b consumes another queue and only serves the API.
    const a = spawnWorker(db, { ...common, QUEUES: "enrichment" });
    const b = spawnWorker(db, { ...common, QUEUES: "ingestion" });
    try {
      const [aBase, bBase] = [await a.baseUrl(), await b.baseUrl()];
      for (const base of [aBase, bBase]) {
        await waitFor("ready", async () => (await readyz(base)).code === 200, STARTUP_MS, 100);
      }
      assert.equal((await readyz(aBase)).body.checks.queues.enrichment, "holding");
      assert.equal((await readyz(bBase)).body.checks.queues.enrichment, "not consumed here");

      const id = await insertReadyBook(db, [ENGLISH]);
      await waitFor("the remote call to be held open", () => engine.inFlight() === 1, 45_000, 50);
      assert.equal((await bookRow(db, id)).metadata_enrichment_status, "Running");

      const res = await fetch(`${bBase}/internal/enrichment/${id}/cancel`, {
        method: "POST",
        headers: auth,
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.status, "Failed");
      assert.equal(body.error, CANCELLED);
      const row = await bookRow(db, id);
      assert.deepEqual(
        [row.metadata_enrichment_status, row.metadata_enrichment_error],
        ["Failed", CANCELLED],
      );
      assert.equal(row.metadata_enrichment_claimed_by, null);
      const [{ attempts }] = await db.sql<{ attempts: { outcome: string }[] }[]>`
        select metadata_enrichment_attempts as attempts from user_books where id = ${id}`;
      assert.deepEqual(attempts.map((x) => x.outcome), ["cancelled"]);
      await waitFor("the held call to be aborted", () => engine.aborted() === 1, 5000, 25);
      assert.ok(
        a.logs.some((l) => l.msg === "job cancelled by admin"),
        "a, the runner, settled it",
      );
      assert.ok(!b.logs.some((l) => l.msg === "job cancelled by admin"));
      assert.equal((await readyz(aBase)).body.checks.queues.enrichment, "holding");
    } finally {
      engine.releaseHeld();
      await Promise.allSettled([stop(a), stop(b)]);
      await engine.close();
    }
  },
);
