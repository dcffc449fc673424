/**
 * The user book and enrichment routes through `createApi` (`app.request`, real multipart bodies
 * built by `FormData`): upload streamed to disk, the size cap, JSON enqueue, owner_id, reads and
 * admin retries.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MAX_BODY_BYTES } from "../../../lib/http/api.ts";
import { UNLIMITED_BODY_PATHS, userBookRoutes } from "../../../queues/user_ingestion/routes.ts";
import { enrichmentRoutes } from "../../../queues/enrichment/routes.ts";
import { testApi, testControl } from "../../_api.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { epubBytes, userIngestionContext } from "../../_user_books.ts";

const TOKEN = "api-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

async function setup(db: TestDb, maxUploadBytes = 1024 * 1024) {
  const ctx = await userIngestionContext(db);
  const app = testApi(ctx, TOKEN, {
    routes: {
      "/user-books": userBookRoutes(ctx, maxUploadBytes, testControl(ctx)),
      "/enrichment": enrichmentRoutes(ctx, testControl(ctx)),
    },
    unlimitedBodies: UNLIMITED_BODY_PATHS,
  });
  const upload = (fields: Record<string, string>, file?: { bytes: Uint8Array; name: string }) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    if (file) form.append("file", new Blob([file.bytes as BlobPart]), file.name);
    return app.request("/internal/user-books", { method: "POST", headers: auth, body: form });
  };
  const postJson = (body: unknown) =>
    app.request("/internal/user-books", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const uploads = () => {
    try {
      return [...Deno.readDirSync(`${ctx.storageDir}/uploads`)].map((e) => e.name);
    } catch {
      return [];
    }
  };
  return { ctx, app, upload, postJson, uploads };
}

dbTest(
  "POST /internal/user-books multipart streams the file to uploads/ and creates the book and its job",
  async (db) => {
    const { ctx, upload, uploads } = await setup(db);
    const bytes = epubBytes();
    const res = await upload({ owner_id: "7" }, { bytes, name: "My Book.EPUB" });
    assert.equal(res.status, 201);
    const body = await res.json();
    assert.deepEqual(Object.keys(body).sort(), ["job", "user_book"]);
    assert.deepEqual([body.user_book.owner_id, body.user_book.status], ["7", "Processing"]);
    assert.deepEqual([body.job.status, body.job.user_book_id], ["Queued", body.user_book.id]);
    assert.match(body.job.source_path, /^uploads\/[0-9a-f-]{36}\.epub$/);
    assert.deepEqual(await Deno.readFile(`${ctx.storageDir}/${body.job.source_path}`), bytes);
    assert.equal(uploads().length, 1);
  },
);

dbTest("POST /internal/user-books takes an upload above the 64 KiB JSON body limit", async (db) => {
  const { upload } = await setup(db, 1024 * 1024);
  const bytes = new Uint8Array(4 * MAX_BODY_BYTES).fill(0x61);
  const res = await upload({ owner_id: "7" }, { bytes, name: "big.txt" });
  assert.equal(res.status, 201);
});

dbTest(
  "POST /internal/user-books answers 413 above MAX_UPLOAD_BYTES and leaves no partial file",
  async (db) => {
    const { upload, uploads, ctx } = await setup(db, 10_000);
    // Just over the cap: the Content-Length check lets it through, the streaming cap stops it.
    const over = await upload({ owner_id: "7" }, {
      bytes: new Uint8Array(10_001).fill(0x61),
      name: "a.txt",
    });
    assert.equal(over.status, 413);
    assert.match((await over.json()).error, /MAX_UPLOAD_BYTES \(10000 bytes\)/);
    // Far over: refused from its declared Content-Length.
    const far = await upload({ owner_id: "7" }, {
      bytes: new Uint8Array(200_000).fill(0x61),
      name: "a.txt",
    });
    assert.equal(far.status, 413);
    assert.deepEqual(uploads(), []);
    const [{ n }] = await ctx.sql<{ n: number }[]>`select count(*)::int as n from user_books`;
    assert.equal(n, 0);
    // Exactly at the cap is accepted.
    const at = await upload({ owner_id: "7" }, {
      bytes: new Uint8Array(10_000).fill(0x61),
      name: "a.txt",
    });
    assert.equal(at.status, 201);
  },
);

dbTest(
  "POST /internal/user-books refuses a bad owner_id or a missing file, keeping no file",
  async (db) => {
    const { upload, uploads, postJson } = await setup(db);
    const file = { bytes: new TextEncoder().encode("hello"), name: "a.txt" };
    for (const owner of ["0", "-3", "abc", "1.5", ""]) {
      const res = await upload({ owner_id: owner }, file);
      assert.equal(res.status, 400, `owner_id ${JSON.stringify(owner)}`);
      assert.match((await res.json()).error, /^Invalid owner_id/);
    }
    const missingOwner = await upload({}, file);
    assert.equal(missingOwner.status, 400);
    const noFile = await upload({ owner_id: "7" });
    assert.equal(noFile.status, 400);
    assert.match((await noFile.json()).error, /file/);
    assert.deepEqual(uploads(), []);
    for (const owner of [0, -1, 1.5, "x", null]) {
      const res = await postJson({ owner_id: owner, source_path: "a.txt" });
      assert.equal(res.status, 400, `owner_id ${JSON.stringify(owner)}`);
    }
  },
);

dbTest(
  "POST /internal/user-books JSON (not an upload) keeps the 64 KiB body limit: 413, unread",
  async (db) => {
    const { ctx, postJson } = await setup(db);
    await Deno.writeTextFile(`${ctx.storageDir}/a.txt`, "hello");
    const res = await postJson({
      owner_id: 7,
      source_path: "a.txt",
      pad: "x".repeat(MAX_BODY_BYTES),
    });
    assert.equal(res.status, 413);
    assert.match((await res.json()).error, /exceeds 65536 bytes/);
    const [{ count }] = await ctx.sql`select count(*)::int as count from user_books`;
    assert.equal(count, 0);
  },
);

dbTest(
  "POST /internal/user-books JSON enqueues a file already under STORAGE_DIR; owner_id as number or string",
  async (db) => {
    const { ctx, postJson } = await setup(db);
    await Deno.writeTextFile(`${ctx.storageDir}/a.txt`, "hello");
    for (const owner of [7, "7"]) {
      const res = await postJson({ owner_id: owner, source_path: "a.txt" });
      assert.equal(res.status, 201);
      const body = await res.json();
      assert.deepEqual([body.user_book.owner_id, body.job.source_path], ["7", "a.txt"]);
    }
    const missing = await postJson({ owner_id: 7, source_path: "nope.txt" });
    assert.equal(missing.status, 400);
    const outside = await postJson({ owner_id: 7, source_path: "../etc/passwd" });
    assert.equal(outside.status, 400);
  },
);

dbTest("POST /internal/user-books refuses other content types with 415", async (db) => {
  const { app } = await setup(db);
  const res = await app.request("/internal/user-books", {
    method: "POST",
    headers: { ...auth, "content-type": "text/plain" },
    body: "owner_id=7",
  });
  assert.equal(res.status, 415);
});

dbTest(
  "GET /internal/user-books/:id answers the book, its job and its enrichment; retries answer 409 unless Failed",
  async (db) => {
    const { app, upload } = await setup(db);
    const created = await (await upload({ owner_id: "7" }, {
      bytes: new TextEncoder().encode("hello"),
      name: "a.txt",
    })).json();
    const id = created.user_book.id;
    const res = await app.request(`/internal/user-books/${id}`, { headers: auth });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(Object.keys(body).sort(), ["enrichment", "job", "user_book"]);
    assert.equal(body.job.id, created.job.id);
    assert.deepEqual(
      [body.enrichment.status, body.enrichment.language, body.enrichment.summary],
      [null, null, null],
    );
    assert.equal((await app.request("/internal/user-books/999", { headers: auth })).status, 404);

    const retryJob = await app.request(`/internal/user-books/${id}/retry`, {
      method: "POST",
      headers: auth,
    });
    assert.equal(retryJob.status, 409);
    const retryEnrichment = await app.request(`/internal/enrichment/${id}/retry`, {
      method: "POST",
      headers: auth,
    });
    assert.equal(retryEnrichment.status, 409);

    await db.sql`update user_ingestion_jobs set status = 'Failed', error = 'x', attempt_count = 3`;
    await db.sql`update user_books set status = 'Failed', error = 'y',
      metadata_enrichment_status = 'Failed', metadata_enrichment_attempt_count = 3`;
    const retried = await app.request(`/internal/user-books/${id}/retry`, {
      method: "POST",
      headers: auth,
    });
    assert.equal(retried.status, 200);
    assert.deepEqual(
      [(await retried.json()).status, (await db.sql`select status from user_books`)[0].status],
      ["Queued", "Processing"],
    );
    const enriched = await app.request(`/internal/enrichment/${id}/retry`, {
      method: "POST",
      headers: auth,
    });
    assert.equal(enriched.status, 200);
    assert.deepEqual([(await enriched.json()).status], ["Pending"]);
  },
);
