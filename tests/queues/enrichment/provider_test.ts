/**
 * The enrichment provider client (queues/enrichment/_remote.ts, its answers read by _answer.ts) against a real local HTTP server
 * that misbehaves as providers do (tests/_provider.ts), through the queue's own verbs on real
 * Postgres: waits asked by `Retry-After` / `retry-after-ms` inside the run and beyond its bound,
 * backoff with jitter for 5xx and timeouts, a timeout's reason, a shutdown during a wait, the
 * Idempotency-Key per intent, the answer shapes models send, the local metadata kept on a
 * provider fault, and the tokens counted from `usage`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import * as enrichment from "../../../queues/enrichment/mod.ts";
import { MAX_ATTEMPTS, type TokenTally } from "../../../queues/enrichment/mod.ts";
import { type RemoteSettings } from "../../../queues/enrichment/_remote.ts";
import { parseAnswer } from "../../../queues/enrichment/_answer.ts";
import { tokenMetrics } from "../../../queues/enrichment/view.ts";
import { dbTest, type TestDb, waitFor } from "../../_db.ts";
import { ANSWER, bookRow, ENGLISH, enrichmentContext, insertReadyBook } from "../../_user_books.ts";
import { type Provider, type ProviderAnswer, startProvider } from "../../_provider.ts";

const OK: ProviderAnswer = {
  kind: "content",
  content: JSON.stringify(ANSWER),
  usage: { prompt_tokens: 120, completion_tokens: 30, total_tokens: 150 },
};

function settings(provider: Provider, more: Partial<RemoteSettings> = {}): RemoteSettings {
  return { url: provider.url, apiKey: "sk-test", model: "m", timeoutMs: 5000, ...more };
}

// One claimed run of a fresh book against the scripted provider.
async function runOnce(
  db: TestDb,
  script: ProviderAnswer[],
  more: Partial<RemoteSettings> = {},
  tokens?: TokenTally,
) {
  const provider = startProvider(script);
  const ctx = { ...enrichmentContext(db, { remote: settings(provider, more) }), tokens };
  const id = await insertReadyBook(db, [ENGLISH]);
  const job = (await enrichment.claim(ctx))!;
  const started = performance.now();
  try {
    await enrichment.run(ctx, job, new AbortController().signal);
  } finally {
    await provider.close();
  }
  return { ctx, id, job, provider, ms: performance.now() - started, row: await bookRow(db, id) };
}

const gaps = (p: Provider) => p.requests.slice(1).map((r, i) => r.at - p.requests[i].at);

dbTest(
  "a 429 with Retry-After: 1 is waited out inside the run: one attempt, Completed, the same key",
  async (db) => {
    const { row, provider } = await runOnce(db, [
      { kind: "status", status: 429, headers: { "retry-after": "1" }, message: "slow down" },
      OK,
    ]);
    assert.equal(row.metadata_enrichment_status, "Completed");
    assert.equal(row.metadata_enrichment_attempt_count, 1);
    assert.equal(provider.requests.length, 2);
    assert.ok(gaps(provider)[0] >= 990, `waited ${gaps(provider)[0]} ms, asked 1000`);
    assert.equal(provider.requests[0].key, provider.requests[1].key);
  },
);

dbTest(
  "retry-after-ms is honoured over the backoff (1500 ms asked, the backoff is at most 500)",
  async (db) => {
    const { row, provider } = await runOnce(db, [
      { kind: "status", status: 503, headers: { "retry-after-ms": "1500" } },
      OK,
    ]);
    assert.equal(row.metadata_enrichment_status, "Completed");
    assert.ok(gaps(provider)[0] >= 1490, `waited ${gaps(provider)[0]} ms`);
  },
);

dbTest(
  "a Retry-After beyond ENRICHMENT_RETRY_AFTER_MAX_MS is not waited: the attempt is spent with the provider's reason, due only after the asked wait",
  async (db) => {
    const { row, provider, ms, ctx } = await runOnce(
      db,
      [{ kind: "status", status: 429, headers: { "retry-after": "30" }, message: "quota" }],
      { retryAfterMaxMs: 1000 },
    );
    assert.equal(provider.requests.length, 1);
    assert.ok(ms < 1000, `the run took ${ms} ms`);
    assert.deepEqual(
      [row.metadata_enrichment_status, row.metadata_enrichment_attempt_count],
      ["Pending", 1],
    );
    assert.match(
      row.metadata_enrichment_error ?? "",
      /^attempt 1 of 3 failed, will retry: the enrichment API answered 429: .*quota.*asked to wait 30000 ms, more than ENRICHMENT_RETRY_AFTER_MAX_MS \(1000 ms\)/,
    );
    assert.equal(await enrichment.claim(ctx), null, "not due for 30 s");
    const due = await enrichment.nextDueMs(ctx);
    assert.ok(due !== null && due > 28_000 && due <= 30_000, `due in ${due} ms`);
  },
);

dbTest(
  "a Retry-After beyond the bound at the attempts cap is Failed with the reason",
  async (db) => {
    const provider = startProvider([
      { kind: "status", status: 429, headers: { "retry-after": "600" }, message: "quota" },
    ]);
    try {
      const ctx = enrichmentContext(db, { remote: settings(provider) });
      const id = await insertReadyBook(db, [ENGLISH]);
      await db.sql`
      update user_books set metadata_enrichment_attempt_count = ${MAX_ATTEMPTS - 1}
      where id = ${id}`;
      await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
      const row = await bookRow(db, id);
      assert.equal(row.metadata_enrichment_status, "Failed");
      assert.match(row.metadata_enrichment_error ?? "", /^attempts exhausted \(3 of 3\): .*429/);
    } finally {
      await provider.close();
    }
  },
);

dbTest(
  "a shutdown during a Retry-After wait ends the run at once; giveBack() → Pending, attempt not counted",
  async (db) => {
    const provider = startProvider([{
      kind: "status",
      status: 429,
      headers: { "retry-after": "30" },
    }]);
    try {
      const ctx = enrichmentContext(db, { remote: settings(provider) });
      const id = await insertReadyBook(db, [ENGLISH]);
      const job = (await enrichment.claim(ctx))!;
      const abort = new AbortController();
      const running = enrichment.run(ctx, job, abort.signal);
      await waitFor("the first request", () => provider.requests.length === 1);
      await new Promise((r) => setTimeout(r, 100));
      const at = performance.now();
      abort.abort(new Error("Shutting down"));
      await assert.rejects(running, /Shutting down/);
      assert.ok(performance.now() - at < 500, "the wait was aborted");
      assert.equal(await enrichment.giveBack(ctx, job), true);
      const row = await bookRow(db, id);
      assert.deepEqual(
        [row.metadata_enrichment_status, row.metadata_enrichment_attempt_count],
        ["Pending", 0],
      );
      assert.equal(provider.requests.length, 1);
    } finally {
      await provider.close();
    }
  },
);

dbTest(
  "5xx is asked again with exponential backoff and jitter inside the run, the same key each time",
  async (db) => {
    const { row, provider } = await runOnce(db, [
      { kind: "status", status: 500 },
      { kind: "status", status: 502 },
      OK,
    ], { backoffMs: 200 });
    assert.equal(row.metadata_enrichment_status, "Completed");
    assert.equal(row.metadata_enrichment_attempt_count, 1);
    const [first, second] = gaps(provider);
    // Step n waits 200·2^(n-1) ms less up to 25 %.
    assert.ok(first >= 150 && first < 400, `first wait ${first}`);
    assert.ok(second >= 300 && second < 600, `second wait ${second}`);
    assert.equal(new Set(provider.requests.map((r) => r.key)).size, 1);
  },
);

dbTest(
  "a timeout says 'timed out after N ms', is asked again with backoff, then spends the attempt",
  async (db) => {
    const { row, provider } = await runOnce(db, [{ kind: "hold" }], {
      timeoutMs: 300,
      backoffMs: 100,
    });
    assert.equal(provider.requests.length, 3);
    // Gaps are read at the provider, whose reads of the client's sends lag by a few ms under
    // load: at least the timeout and the least backoff, less 30 ms of that lag.
    for (const gap of gaps(provider)) assert.ok(gap >= 300 + 75 - 30, `gap ${gap}`);
    assert.deepEqual(
      [row.metadata_enrichment_status, row.metadata_enrichment_attempt_count],
      ["Pending", 1],
    );
    assert.match(row.metadata_enrichment_error ?? "", /timed out after 300 ms$/);
    assert.doesNotMatch(row.metadata_enrichment_error ?? "", /Request was aborted/);
    await waitFor("the server to see the calls end", () => provider.aborted() === 3);
  },
);

dbTest("a timeout before the answer's headers also says 'timed out after N ms'", async (db) => {
  const { row, provider } = await runOnce(db, [{ kind: "silent" }], {
    timeoutMs: 200,
    maxRetries: 1,
    backoffMs: 50,
  });
  assert.equal(provider.requests.length, 2);
  assert.equal(row.metadata_enrichment_status, "Pending");
  assert.match(row.metadata_enrichment_error ?? "", /timed out after 200 ms$/);
});

dbTest(
  "an admin retry is a new intent: its Idempotency-Key is not the failed attempt's",
  async (db) => {
    const provider = startProvider([{ kind: "status", status: 400, message: "bad model" }, OK]);
    try {
      const ctx = enrichmentContext(db, { remote: settings(provider) });
      const id = await insertReadyBook(db, [ENGLISH]);
      await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
      assert.equal((await bookRow(db, id)).metadata_enrichment_status, "Failed");
      assert.ok(await enrichment.retry(ctx, id));
      await enrichment.run(ctx, (await enrichment.claim(ctx))!, new AbortController().signal);
      assert.equal((await bookRow(db, id)).metadata_enrichment_status, "Completed");
      const [failed, retried] = provider.requests.map((r) => r.key!);
      const shape = new RegExp(`^book-${id}-[0-9a-f-]{36}-attempt-1$`);
      assert.match(failed, shape);
      assert.match(retried, shape);
      assert.notEqual(failed, retried);
    } finally {
      await provider.close();
    }
  },
);

dbTest(
  "the local metadata is saved when the provider fails, permanently (Failed) or for now (Pending)",
  async (db) => {
    for (
      const [answer, status] of [
        [{ kind: "status", status: 401, message: "bad key" }, "Failed"],
        [{ kind: "status", status: 500 }, "Pending"],
      ] as const
    ) {
      const { row } = await runOnce(db, [answer], { maxRetries: 0 });
      assert.equal(row.metadata_enrichment_status, status);
      assert.equal(row.metadata?.engine, "local");
      assert.equal(row.metadata?.language, "en");
      assert.equal(row.metadata?.word_count, 50);
      assert.equal(row.metadata?.summary, undefined);
    }
  },
);

// What models send around the JSON asked for.
const WRAPPINGS: Array<(json: string) => string> = [
  (j) => j,
  (j) => `<think>The user wants {"summary"}. Let me think about "genres": {}</think>\n${j}`,
  (j) => `<thinking>\nplan\n</thinking>${j}`,
  (j) => "Here is the catalogue entry you asked for:\n\n```json\n" + j + "\n```\nHope it helps!",
  (j) => "```\n" + j + "\n```",
  (j) => `Sure! ${j} Let me know if you need more.`,
  (j) => `<think>a } stray { brace</think> Prose with {not json} first, then ${j}`,
];

Deno.test("parseAnswer() finds the first JSON object in every shape models send", () => {
  for (const [i, wrap] of WRAPPINGS.entries()) {
    for (const spacing of [undefined, 2]) {
      const json = JSON.stringify(
        { ...ANSWER, summary: `A "quoted" {brace} summary ${i}.` },
        null,
        spacing,
      );
      assert.deepEqual(
        parseAnswer(wrap(json)),
        { ...ANSWER, summary: `A "quoted" {brace} summary ${i}.` },
        `wrapping ${i}`,
      );
    }
  }
  assert.throws(
    () => parseAnswer("<think>" + JSON.stringify(ANSWER)),
    /it is not JSON \(no JSON object in it\)/,
    "a reasoning block that never closes holds no answer",
  );
  assert.throws(() => parseAnswer("no braces at all"), /it is not JSON/);
  assert.throws(
    () => parseAnswer(`Here: ${JSON.stringify({ ...ANSWER, genres: "fiction" })}`),
    /"genres": .*array/,
  );
});

dbTest("reasoning and prose around a fenced block through a real run: Completed", async (db) => {
  const { row } = await runOnce(db, [{
    kind: "content",
    content: "<think>Let me consider the book.</think>\nSure, here it is:\n```json\n" +
      JSON.stringify(ANSWER) + "\n```",
  }]);
  assert.equal(row.metadata_enrichment_status, "Completed");
  assert.equal(row.metadata?.summary, ANSWER.summary);
});

dbTest(
  "an answer streamed as text/event-stream when not asked is assembled, its usage counted",
  async (db) => {
    const json = JSON.stringify(ANSWER);
    const parts = [json.slice(0, 10), json.slice(10, 40), json.slice(40)];
    const tally: TokenTally = { prompt: 0, completion: 0, requests: 0 };
    const { row, provider } = await runOnce(
      db,
      [{
        kind: "sse",
        parts,
        usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 },
      }],
      {},
      tally,
    );
    assert.equal(provider.requests[0].stream, undefined, "the request did not ask for a stream");
    assert.equal(row.metadata_enrichment_status, "Completed");
    assert.equal(row.metadata?.summary, ANSWER.summary);
    assert.equal(row.metadata?.model, "sse-model");
    assert.deepEqual(tally, { prompt: 7, completion: 5, requests: 1 });
  },
);

dbTest("the tokens of every answered request are counted and exported as a metric", async (db) => {
  const tally: TokenTally = { prompt: 0, completion: 0, requests: 0 };
  // A malformed answer still used (and reported) tokens.
  await runOnce(db, [{ ...OK, content: "no json" }], {}, tally);
  await runOnce(db, [OK], {}, tally);
  assert.deepEqual(tally, { prompt: 240, completion: 60, requests: 2 });
  const registry = new Registry();
  tokenMetrics(registry, "t_", tally);
  const text = await registry.metrics();
  assert.match(text, /^t_enrichment_tokens_total\{kind="prompt"\} 240$/m);
  assert.match(text, /^t_enrichment_tokens_total\{kind="completion"\} 60$/m);
  assert.match(text, /^t_enrichment_requests_total 2$/m);
  tally.prompt += 10;
  assert.match(await registry.metrics(), /^t_enrichment_tokens_total\{kind="prompt"\} 250$/m);
});

Deno.test("the retry settings are read and checked, the engine on or off", () => {
  const on = { ENRICHMENT_API_URL: "http://127.0.0.1:1/v1", ENRICHMENT_MODEL: "m" };
  const read = enrichment.readRemoteSettings({
    ...on,
    ENRICHMENT_API_MAX_RETRIES: "0",
    ENRICHMENT_RETRY_AFTER_MAX_MS: "5000",
  });
  assert.deepEqual([read?.maxRetries, read?.retryAfterMaxMs], [0, 5000]);
  const defaults = enrichment.readRemoteSettings(on);
  assert.deepEqual([defaults?.maxRetries, defaults?.retryAfterMaxMs], [2, 120_000]);
  for (
    const [name, value] of [
      ["ENRICHMENT_API_MAX_RETRIES", "11"],
      ["ENRICHMENT_API_MAX_RETRIES", "-1"],
      ["ENRICHMENT_RETRY_AFTER_MAX_MS", "soon"],
    ]
  ) {
    assert.throws(
      () => enrichment.readRemoteSettings({ [name]: value }),
      new RegExp(`^ConfigError: Cannot parse ${name}: expected an integer`),
    );
  }
});
