/**
 * The user ingestion and enrichment queues in a spawned `main.ts` with real signals: an upload
 * end to end (local and remote engine), SIGTERM gives each queue's claim back, and SIGKILL with a
 * restart recovers each — the remote engine charged at most once per attempt, never twice at once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";
import { mkfifo, releaseFifo } from "../_fs.ts";
import { SMALL_BOOK } from "../_ingestion.ts";
import {
  ANSWER,
  bookRow,
  type ChatServer,
  ENGLISH,
  epubBytes,
  insertReadyBook,
  insertUserBook,
  startChatServer,
  stripIntent,
  userJobRow,
} from "../_user_books.ts";

const auth = { authorization: `Bearer ${TEST_TOKEN}` };
// Generous: the shared test machine runs many suites at once, and a worker's start (compile,
// connect, migrate) has taken over 15 s there.
const STARTUP_MS = 60_000;
/** Every spawned worker: a shutdown budget that a loaded machine still meets. */
const BASE_ENV = { SHUTDOWN_BUDGET_MS: "10000" };

async function storage(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "textstack-uploads-process-" });
}

function remoteEnv(server: ChatServer): Record<string, string> {
  return {
    ENRICHMENT_API_URL: server.url,
    ENRICHMENT_API_KEY: "sk-test",
    ENRICHMENT_MODEL: "test-model",
  };
}

async function stop(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  const status = await worker.exited;
  assert.equal(status.code, 0, JSON.stringify(worker.logs.slice(-12)));
}

async function uploadAndWait(worker: WorkerProcess, db: TestDb) {
  await worker.waitForLog("http listening", {}, STARTUP_MS);
  const base = await worker.baseUrl();
  const form = new FormData();
  form.append("owner_id", "7");
  form.append("file", new Blob([epubBytes() as BlobPart]), "lighthouse.epub");
  const res = await fetch(`${base}/internal/user-books`, {
    method: "POST",
    headers: auth,
    body: form,
  });
  assert.equal(res.status, 201);
  const { user_book } = await res.json();
  const read = async () =>
    await (await fetch(`${base}/internal/user-books/${user_book.id}`, { headers: auth })).json();
  const done = await waitFor(
    "Ready and enriched",
    async () => {
      const body = await read();
      return body.enrichment.status === "Completed" ? body : null;
    },
    STARTUP_MS,
    50,
  );
  assert.equal((await bookRow(db, user_book.id)).status, "Ready");
  return done;
}

dbTest("main.ts: an upload ends Ready with metadata from the local engine", async (db) => {
  const dir = await storage();
  const worker = spawnWorker(db, { ...BASE_ENV, STORAGE_DIR: dir });
  try {
    const body = await uploadAndWait(worker, db);
    assert.deepEqual([body.user_book.status, body.user_book.title, body.job.status], [
      "Ready",
      "The Lighthouse",
      "Completed",
    ]);
    assert.equal(body.enrichment.language, "en");
    assert.ok(body.enrichment.word_count > 90, `word_count ${body.enrichment.word_count}`);
    assert.equal(body.enrichment.reading_time_minutes, 1);
    assert.equal(body.enrichment.engine, "local");
    assert.equal(body.enrichment.summary, null);
    const assets = [...Deno.readDirSync(`${dir}/user-books/${body.user_book.id}`)];
    assert.equal(assets.length, 2);
  } finally {
    await stop(worker);
  }
});

dbTest("main.ts: an upload ends Ready with the remote engine's summary, one call", async (db) => {
  const server = startChatServer("answer");
  const worker = spawnWorker(db, {
    ...BASE_ENV,
    STORAGE_DIR: await storage(),
    ...remoteEnv(server),
  });
  try {
    const body = await uploadAndWait(worker, db);
    assert.equal(body.enrichment.summary, ANSWER.summary);
    assert.equal(body.enrichment.language, "en");
    assert.deepEqual(server.keys.map(stripIntent), [`book-${body.user_book.id}-attempt-1`]);
  } finally {
    await stop(worker);
    await server.close();
  }
});

dbTest(
  "main.ts on SIGTERM gives the upload back: Queued, attempt not counted, book Processing, no error",
  async (db) => {
    const dir = await storage();
    await mkfifo(`${dir}/stream.txt`);
    const worker = spawnWorker(db, { ...BASE_ENV, STORAGE_DIR: dir });
    try {
      await worker.waitForLog("consumer started", { queue: "user_ingestion" }, STARTUP_MS);
      const { bookId, jobId } = await insertUserBook(db, "stream.txt");
      await worker.waitForLog("job claimed", { queue: "user_ingestion", id: jobId }, STARTUP_MS);
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
      const job = await userJobRow(db, jobId);
      assert.deepEqual([job.status, job.attempt_count, job.error, job.claimed_by], [
        "Queued",
        0,
        null,
        null,
      ]);
      const book = await bookRow(db, bookId);
      assert.deepEqual([book.status, book.error], ["Processing", null]);
    } finally {
      await releaseFifo(`${dir}/stream.txt`);
    }
  },
);

dbTest(
  "main.ts after SIGKILL mid-upload: the restarted worker recovers the job with the attempt spent and finishes it",
  async (db) => {
    const dir = await storage();
    const fifo = `${dir}/stream.txt`;
    await mkfifo(fifo);
    const env = {
      ...BASE_ENV,
      STORAGE_DIR: dir,
      USER_INGESTION_STALE_AFTER_MS: "1500",
      POLL_INTERVAL_MS: "200",
    };
    const first = spawnWorker(db, env);
    await first.waitForLog("consumer started", { queue: "user_ingestion" }, STARTUP_MS);
    const { bookId, jobId } = await insertUserBook(db, "stream.txt");
    await first.waitForLog("job claimed", { queue: "user_ingestion", id: jobId }, STARTUP_MS);
    first.child.kill("SIGKILL");
    assert.equal((await first.exited).signal, "SIGKILL");
    assert.equal((await bookRow(db, bookId)).status, "Processing");

    const second = spawnWorker(db, env);
    try {
      await second.waitForLog(
        "job claimed",
        { queue: "user_ingestion", id: jobId, attempt: 2 },
        STARTUP_MS,
      );
      await Deno.writeTextFile(fifo, SMALL_BOOK);
      await waitFor(
        "Ready",
        async () => (await bookRow(db, bookId)).status === "Ready",
        STARTUP_MS,
      );
      assert.equal((await userJobRow(db, jobId)).attempt_count, 2);
    } finally {
      await stop(second);
    }
  },
);

dbTest(
  "main.ts on SIGTERM mid-call gives the enrichment back: Pending, attempt not counted; the call is cancelled",
  async (db) => {
    const server = startChatServer("hold");
    const worker = spawnWorker(db, {
      ...BASE_ENV,
      STORAGE_DIR: await storage(),
      ...remoteEnv(server),
    });
    try {
      await worker.waitForLog("consumer started", { queue: "enrichment" }, STARTUP_MS);
      const id = await insertReadyBook(db, [ENGLISH]);
      await worker.waitForLog("job claimed", { queue: "enrichment", id }, STARTUP_MS);
      await waitFor("the call", () => server.inFlight() === 1);
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
      const row = await bookRow(db, id);
      assert.deepEqual(
        [
          row.metadata_enrichment_status,
          row.metadata_enrichment_attempt_count,
          row.metadata_enrichment_error,
        ],
        ["Pending", 0, null],
      );
      await waitFor("the server to see the call cancelled", () => server.aborted() === 1);
      assert.deepEqual(server.keys.map(stripIntent), [`book-${id}-attempt-1`]);
    } finally {
      await server.close();
    }
  },
);

dbTest(
  "main.ts after SIGKILL mid-call: the restart charges the book once more, for attempt 2, never two calls at once",
  async (db) => {
    const server = startChatServer("hold");
    const env = {
      ...BASE_ENV,
      STORAGE_DIR: await storage(),
      ENRICHMENT_STALE_AFTER_MS: "1500",
      POLL_INTERVAL_MS: "200",
      ...remoteEnv(server),
    };
    try {
      const first = spawnWorker(db, env);
      await first.waitForLog("consumer started", { queue: "enrichment" }, STARTUP_MS);
      const id = await insertReadyBook(db, [ENGLISH]);
      await waitFor("the first call", () => server.inFlight() === 1, STARTUP_MS);
      first.child.kill("SIGKILL");
      assert.equal((await first.exited).signal, "SIGKILL");
      await waitFor("the server to see the first call die", () => server.inFlight() === 0);
      assert.equal((await bookRow(db, id)).metadata_enrichment_status, "Running");
      server.mode = "answer";

      const second = spawnWorker(db, env);
      try {
        await waitFor(
          "Completed",
          async () => (await bookRow(db, id)).metadata_enrichment_status === "Completed",
          STARTUP_MS,
          50,
        );
        const row = await bookRow(db, id);
        assert.equal(row.metadata_enrichment_attempt_count, 2);
        assert.equal(row.metadata?.summary, ANSWER.summary);
        assert.deepEqual(server.keys.map(stripIntent), [
          `book-${id}-attempt-1`,
          `book-${id}-attempt-2`,
        ]);
        assert.equal(server.maxInFlight(), 1);
      } finally {
        await stop(second);
      }
    } finally {
      await server.close();
    }
  },
);
