/**
 * The enrichment queue's verbs on real Postgres, and its remote engine against a real local HTTP
 * server speaking the chat-completions API (tests/_user_books.ts): one call per attempt, the
 * idempotency key, no client retries, malformed answers, shutdown, stale and orphan recovery.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "../../../lib/db.ts";
import * as enrichment from "../../../queues/enrichment/mod.ts";
import * as enrichmentJobs from "../../../queues/enrichment/jobs.ts";
import { MAX_ATTEMPTS } from "../../../queues/enrichment/mod.ts";
import { parseAnswer } from "../../../queues/enrichment/_answer.ts";
import { WORDS_PER_MINUTE } from "../../../queues/enrichment/_local.ts";
import { dbTest, type TestDb, waitFor } from "../../_db.ts";
import {
  ANSWER,
  bookRow,
  type ChatServer,
  ENGLISH,
  enrichmentContext,
  insertReadyBook,
  startChatServer,
  startQueueConsumer,
  stripIntent,
} from "../../_user_books.ts";

// maxRetries 0: one request per queue attempt (the in-run retries are tested in provider_test.ts).
function remote(server: ChatServer) {
  return {
    url: server.url,
    apiKey: "sk-test",
    model: "test-model",
    timeoutMs: 5000,
    maxRetries: 0,
  };
}

async function setRunning(
  db: TestDb,
  id: string,
  attempts: number,
  claimedBy: string,
  age = "0 seconds",
): Promise<void> {
  await db.sql`
    update user_books
    set metadata_enrichment_status = 'Running', metadata_enrichment_attempt_count = ${attempts},
        metadata_enrichment_claimed_by = ${claimedBy},
        metadata_enrichment_started_at = now() - ${age}::interval
    where id = ${id}`;
}

dbTest("claim() takes a Pending book: Running, attempt 1, this boot's id", async (db) => {
  const ctx = enrichmentContext(db);
  const id = await insertReadyBook(db, [ENGLISH]);
  const job = await enrichment.claim(ctx);
  assert.deepEqual([job?.id, job?.attempt_count, job?.claimed_by], [id, 1, ctx.bootId]);
  const row = await bookRow(db, id);
  assert.deepEqual([row.metadata_enrichment_status, row.metadata_enrichment_attempt_count], [
    "Running",
    1,
  ]);
  assert.equal(await enrichment.claim(ctx), null);
});

dbTest("claim() skips a book another session holds", async (db) => {
  const ctx = enrichmentContext(db);
  const held = await insertReadyBook(db, [ENGLISH]);
  const free = await insertReadyBook(db, [ENGLISH]);
  const other = connect(db.url, { schema: db.schema, applicationName: "t-holder", max: 1 });
  const locked = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const holding = other.begin(async (tx) => {
    await tx`select 1 from user_books where id = ${held} for update`;
    locked.resolve();
    await release.promise;
  });
  try {
    await locked.promise;
    // Without SKIP LOCKED the claim would wait on the held row: a deadline tells, not a hang.
    const claimed = await Promise.race([
      enrichment.claim(ctx).then((job) => job?.id),
      sleep(5000).then(() => "blocked on the held row"),
    ]);
    assert.equal(claimed, free);
  } finally {
    release.resolve();
    await holding;
    await other.end({ timeout: 1 });
  }
});

dbTest(
  "run() with the local engine saves language, counts, reading time, grade and keywords",
  async (db) => {
    const ctx = enrichmentContext(db);
    const id = await insertReadyBook(db, [ENGLISH, ENGLISH]);
    const job = await enrichment.claim(ctx);
    await enrichment.run(ctx, job!, new AbortController().signal);
    const row = await bookRow(db, id);
    assert.equal(row.metadata_enrichment_status, "Completed");
    const m = row.metadata!;
    assert.equal(m.language, "en");
    assert.equal(m.engine, "local");
    assert.equal(m.word_count, 2 * 50);
    assert.equal(m.reading_time_minutes, Math.ceil(100 / WORDS_PER_MINUTE));
    assert.equal(m.words_per_minute, 238);
    assert.equal(typeof m.readability_grade, "number");
    // "keeper" is the most frequent word; ties ("every", "lighthouse", "ships") sort alphabetically.
    const keywords = m.keywords as string[];
    assert.equal(keywords[0], "keeper");
    assert.ok(keywords.includes("lighthouse"), JSON.stringify(keywords));
    for (const stopword of ["the", "of", "and", "in", "a"]) assert.ok(!keywords.includes(stopword));
    assert.equal(m.summary, undefined);
    const view = await enrichment.getJob(ctx, id);
    assert.deepEqual([view?.status, view?.language, view?.summary], ["Completed", "en", null]);
  },
);

dbTest(
  "run() with the remote engine: one call with the idempotency key, summary saved beside the local fields",
  async (db) => {
    const server = startChatServer("answer");
    try {
      const ctx = enrichmentContext(db, { remote: remote(server) });
      const id = await insertReadyBook(db, [ENGLISH]);
      const job = await enrichment.claim(ctx);
      await enrichment.run(ctx, job!, new AbortController().signal);
      const row = await bookRow(db, id);
      assert.equal(row.metadata_enrichment_status, "Completed");
      assert.deepEqual(server.keys.map(stripIntent), [`book-${id}-attempt-1`]);
      assert.deepEqual(server.auth, ["Bearer sk-test"]);
      const m = row.metadata!;
      assert.deepEqual(
        [m.summary, m.genres, m.audience, m.content_warnings, m.engine, m.language],
        [ANSWER.summary, ANSWER.genres, "adult", [], "openai-compatible", "en"],
      );
      assert.equal(typeof m.word_count, "number");
    } finally {
      await server.close();
    }
  },
);

dbTest("run() accepts a JSON answer wrapped in a Markdown code fence", async (db) => {
  const server = startChatServer("fenced");
  try {
    const ctx = enrichmentContext(db, { remote: remote(server) });
    const id = await insertReadyBook(db, [ENGLISH]);
    await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
    assert.equal((await bookRow(db, id)).metadata?.summary, ANSWER.summary);
  } finally {
    await server.close();
  }
});

dbTest(
  "run() fails a malformed answer at once with a readable reason, after one call",
  async (db) => {
    const server = startChatServer("malformed");
    try {
      const ctx = enrichmentContext(db, { remote: remote(server) });
      const id = await insertReadyBook(db, [ENGLISH]);
      await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
      const row = await bookRow(db, id);
      assert.equal(row.metadata_enrichment_status, "Failed");
      assert.match(
        row.metadata_enrichment_error ?? "",
        /^Cannot use the enrichment answer: it is not JSON/,
      );
      assert.equal(server.keys.length, 1);
    } finally {
      await server.close();
    }
  },
);

Deno.test("parseAnswer() names the first schema issue", () => {
  assert.throws(
    () => parseAnswer(JSON.stringify({ ...ANSWER, genres: "fiction" })),
    /Cannot use the enrichment answer: "genres": .*array/,
  );
  assert.deepEqual(parseAnswer("```\n" + JSON.stringify(ANSWER) + "\n```"), ANSWER);
});

dbTest(
  "run() after an HTTP 500 with no retries left in the run: Pending with the attempt spent, one request",
  async (db) => {
    const server = startChatServer("error500");
    try {
      const ctx = enrichmentContext(db, { remote: remote(server) });
      const id = await insertReadyBook(db, [ENGLISH]);
      await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
      const row = await bookRow(db, id);
      assert.deepEqual([row.metadata_enrichment_status, row.metadata_enrichment_attempt_count], [
        "Pending",
        1,
      ]);
      assert.match(row.metadata_enrichment_error ?? "", /attempt 1 of 3 failed, will retry/);
      assert.equal(server.keys.length, 1);
      // At the cap the same fault is Failed.
      await db.sql`update user_books set metadata_enrichment_attempt_count = 2 where id = ${id}`;
      await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
      const last = await bookRow(db, id);
      assert.deepEqual([last.metadata_enrichment_status, last.metadata_enrichment_attempt_count], [
        "Failed",
        MAX_ATTEMPTS,
      ]);
      assert.deepEqual(server.keys.map(stripIntent), [
        `book-${id}-attempt-1`,
        `book-${id}-attempt-3`,
      ]);
    } finally {
      await server.close();
    }
  },
);

dbTest(
  "run() aborted for shutdown cancels the call; giveBack() → Pending, attempt not counted, no error",
  async (db) => {
    const server = startChatServer("hold");
    try {
      const ctx = enrichmentContext(db, { remote: remote(server) });
      const id = await insertReadyBook(db, [ENGLISH]);
      const job = (await enrichment.claim(ctx))!;
      const abort = new AbortController();
      const running = enrichment.run(ctx, job, abort.signal);
      await waitFor("the call to arrive", () => server.inFlight() === 1);
      abort.abort(new Error("Shutting down"));
      await assert.rejects(running, /Shutting down/);
      await waitFor("the server to see the call end", () => server.aborted() === 1);
      assert.equal(await enrichment.giveBack(ctx, job), true);
      const row = await bookRow(db, id);
      assert.deepEqual(
        [
          row.metadata_enrichment_status,
          row.metadata_enrichment_attempt_count,
          row.metadata_enrichment_error,
          row.metadata_enrichment_claimed_by,
        ],
        ["Pending", 0, null, null],
      );
      assert.equal(await enrichment.giveBack(ctx, job), false, "the fence matches once");
    } finally {
      await server.close();
    }
  },
);

dbTest("run() that lost its claim saves nothing", async (db) => {
  const ctx = enrichmentContext(db);
  const id = await insertReadyBook(db, [ENGLISH]);
  const job = (await enrichment.claim(ctx))!;
  // Recovered and claimed again by another boot at the same attempt count: only the
  // claimed_by fence tells the two runs apart.
  await setRunning(db, id, 1, crypto.randomUUID());
  await enrichment.run(ctx, job, new AbortController().signal);
  const row = await bookRow(db, id);
  assert.deepEqual([row.metadata_enrichment_status, row.metadata], ["Running", null]);
});

dbTest(
  "recover() returns a Running book stale for 10 min to Pending (attempt spent), Failed at the cap",
  async (db) => {
    const ctx = enrichmentContext(db);
    const stale = await insertReadyBook(db, [ENGLISH]);
    const exhausted = await insertReadyBook(db, [ENGLISH]);
    const fresh = await insertReadyBook(db, [ENGLISH]);
    await setRunning(db, stale, 1, crypto.randomUUID(), "11 minutes");
    await setRunning(db, exhausted, MAX_ATTEMPTS, crypto.randomUUID(), "11 minutes");
    await setRunning(db, fresh, 1, crypto.randomUUID(), "9 minutes");
    await enrichment.recover(ctx, new AbortController().signal);
    const a = await bookRow(db, stale);
    assert.deepEqual(
      [
        a.metadata_enrichment_status,
        a.metadata_enrichment_attempt_count,
        a.metadata_enrichment_claimed_by,
      ],
      ["Pending", 1, null],
    );
    const b = await bookRow(db, exhausted);
    assert.deepEqual([b.metadata_enrichment_status, b.metadata_enrichment_attempt_count], [
      "Failed",
      MAX_ATTEMPTS,
    ]);
    assert.match(b.metadata_enrichment_error ?? "", /interrupted/);
    assert.equal((await bookRow(db, fresh)).metadata_enrichment_status, "Running");
  },
);

dbTest(
  "recoverOrphans() gives back this boot's book, returns others' to Pending with the attempt spent, fails them at the cap",
  async (db) => {
    const ctx = enrichmentContext(db);
    const mine = await insertReadyBook(db, [ENGLISH]);
    const crashed = await insertReadyBook(db, [ENGLISH]);
    const exhausted = await insertReadyBook(db, [ENGLISH]);
    const other = crypto.randomUUID();
    await setRunning(db, mine, 2, ctx.bootId);
    await setRunning(db, crashed, 1, other);
    await setRunning(db, exhausted, MAX_ATTEMPTS, other);
    await enrichment.recoverOrphans(ctx, new AbortController().signal);
    const a = await bookRow(db, mine);
    assert.deepEqual(
      [
        a.metadata_enrichment_status,
        a.metadata_enrichment_attempt_count,
        a.metadata_enrichment_error,
      ],
      ["Pending", 1, null],
    );
    const b = await bookRow(db, crashed);
    assert.deepEqual([b.metadata_enrichment_status, b.metadata_enrichment_attempt_count], [
      "Pending",
      1,
    ]);
    assert.match(b.metadata_enrichment_error ?? "", /interrupted/);
    const c = await bookRow(db, exhausted);
    assert.equal(c.metadata_enrichment_status, "Failed");
  },
);

dbTest(
  "recoverOrphans() scope own gives back this boot's book and leaves another boot's claim alone",
  async (db) => {
    const ctx = enrichmentContext(db);
    const mine = await insertReadyBook(db, [ENGLISH]);
    const theirs = await insertReadyBook(db, [ENGLISH]);
    const other = crypto.randomUUID();
    await setRunning(db, mine, 2, ctx.bootId);
    await setRunning(db, theirs, MAX_ATTEMPTS, other);
    await enrichment.recoverOrphans(ctx, new AbortController().signal, "own");
    const a = await bookRow(db, mine);
    assert.deepEqual([a.metadata_enrichment_status, a.metadata_enrichment_attempt_count], [
      "Pending",
      1,
    ]);
    const b = await bookRow(db, theirs);
    assert.deepEqual(
      [
        b.metadata_enrichment_status,
        b.metadata_enrichment_attempt_count,
        b.metadata_enrichment_error,
      ],
      ["Running", MAX_ATTEMPTS, null],
    );
  },
);

dbTest(
  "retry() brings back only a Failed enrichment, attempts reset, error cleared",
  async (db) => {
    const ctx = enrichmentContext(db);
    const id = await insertReadyBook(db, [ENGLISH]);
    assert.equal(await enrichment.retry(ctx, id), null, "Pending is not retried");
    await db.sql`
    update user_books set metadata_enrichment_status = 'Failed',
      metadata_enrichment_attempt_count = 3, metadata_enrichment_error = 'boom' where id = ${id}`;
    const view = await enrichment.retry(ctx, id);
    assert.deepEqual([view?.status, view?.attempt_count, view?.error], ["Pending", 0, null]);
  },
);

dbTest(
  "bulk retry brings the Failed enrichments back to Pending and publishes each as retried, Pending, attempt 0",
  async (db) => {
    const ctx = enrichmentContext(db);
    const id = await insertReadyBook(db, [ENGLISH]);
    await db.sql`
    update user_books set metadata_enrichment_status = 'Failed',
      metadata_enrichment_attempt_count = 3, metadata_enrichment_error = 'boom' where id = ${id}`;
    const seen: unknown[][] = [];
    const stop = ctx.events.observe((e) =>
      void seen.push([e.id, e.transition, e.status, e.attempt])
    );
    const outcome = await enrichmentJobs.bulkRetry(ctx, { status: "Failed" }, false);
    stop();
    assert.deepEqual([outcome.matched, outcome.retried], [1, 1]);
    assert.deepEqual(seen, [[id, "retried", "Pending", 0]]);
    assert.equal((await bookRow(db, id)).metadata_enrichment_status, "Pending");
  },
);

dbTest(
  "Consumer after stale recovery charges the book once, for the next attempt, never two at a time",
  async (db) => {
    const server = startChatServer("answer");
    const ctx = enrichmentContext(db, { remote: remote(server), staleAfterMs: 1500 });
    const id = await insertReadyBook(db, [ENGLISH]);
    // Left Running by a run whose settling writes failed; stale 1.5 s after its start.
    await setRunning(db, id, 1, crypto.randomUUID());
    const running = await startQueueConsumer(db, enrichment, ctx, { pollIntervalMs: 200 });
    try {
      await waitFor("the lock", () => running.lock.held);
      // The orphan rule (recoverOrphans, once the contract calls it) may take it sooner; either
      // way the next attempt is attempt 2 and it is charged once.
      await waitFor(
        "Completed",
        async () => (await bookRow(db, id)).metadata_enrichment_status === "Completed",
        10_000,
      );
      assert.deepEqual(server.keys.map(stripIntent), [`book-${id}-attempt-2`]);
      assert.equal(server.maxInFlight(), 1);
    } finally {
      await running.stop();
      await server.close();
    }
  },
);

dbTest("stats() counts every enrichment status", async (db) => {
  const ctx = enrichmentContext(db);
  await insertReadyBook(db, [ENGLISH]);
  await enrichment.claim(ctx);
  await insertReadyBook(db, [ENGLISH]);
  const stats = await enrichmentJobs.stats(ctx.sql);
  assert.deepEqual(stats.byStatus, { Pending: 1, Running: 1, Completed: 0, Failed: 0 });
});
