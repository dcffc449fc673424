/**
 * What an ingested EPUB leaves for a reader: chapters and the files they use written
 * side by side, every `src` and internal `href` resolving on disk with its `#fragment`; the
 * edition's language, direction and warnings stored and returned with the job; resources kept in
 * the database so the asset repair rewrites them too.
 *
 * @module
 */
import { testControl } from "../../_api.ts";
import assert from "node:assert/strict";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import * as ingestionJobs from "../../../queues/ingestion/jobs.ts";
import { ingestionRoutes } from "../../../queues/ingestion/routes.ts";
import { closeExtractor } from "../../../books/extract.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { ingestionContext, insertJob, jobRow } from "../../_ingestion.ts";
import { bigEpub, PNG } from "../../_epub.ts";
import { writeAssets } from "../../../books/assets.ts";
import { checkWrittenLinks } from "../../_links.ts";

const R7 = new URL("../../fixtures/cases/r7-links-ids.epub", import.meta.url).pathname;

async function ingest(
  db: TestDb,
  ctx: ingestion.IngestionContext,
  name: string,
  bytes: Uint8Array,
  editionId?: string,
): Promise<{ jobId: string; editionId: string; dir: string }> {
  await Deno.writeFile(`${ctx.storageDir}/${name}`, bytes);
  const jobId = editionId === undefined
    ? await insertJob(db, name)
    : (await ingestionJobs.enqueue(ctx, name, editionId)).id;
  const job = await ingestion.claim(ctx);
  assert.ok(job);
  await ingestion.run(ctx, job, new AbortController().signal);
  const row = await jobRow(db, jobId);
  assert.equal(row.status, "Completed", `${row.error}`);
  const [{ asset_version }] = await db.sql`
    select asset_version from editions where id = ${row.edition_id}`;
  return {
    jobId,
    editionId: row.edition_id!,
    dir: `${ctx.storageDir}/editions/${row.edition_id}/v${asset_version}`,
  };
}

dbTest(
  "run() writes an EPUB's images beside its chapters; every link resolves on disk",
  async (db) => {
    const ctx = await ingestionContext(db);
    const r7 = await ingest(db, ctx, "r7.epub", await Deno.readFile(R7));
    assert.deepEqual(
      [...Deno.readDirSync(r7.dir)].map((entry) => entry.name).sort(),
      ["1.html", "2.html", "res"],
    );
    const [stored] = await db.sql`select bytes from resources where edition_id = ${r7.editionId}`;
    assert.deepEqual(await Deno.readFile(`${r7.dir}/res/1-a.png`), new Uint8Array(stored.bytes));
    const small = await checkWrittenLinks(r7.dir);
    assert.deepEqual(small, { checked: 3, broken: [] });

    // Thirty chapters: nav labels, a notes chapter linked both ways, an image every tenth chapter.
    const big = await ingest(db, ctx, "big.epub", bigEpub(30, { paragraphs: 2, imageBytes: 512 }));
    const report = await checkWrittenLinks(big.dir);
    assert.deepEqual(report.broken, []);
    // Footnotes, back links, images, and the contents' 31 entries (30 chapters and the notes).
    assert.equal(report.checked, 30 + 30 + 3 + 31);
    const [{ count }] = await db.sql`
    select count(*)::int from resources where edition_id = ${big.editionId}`;
    assert.equal(count, 3);
  },
);

dbTest(
  "GET /internal/ingestion/jobs/:id returns the job's edition: language, direction, warnings",
  async (db) => {
    const ctx = await ingestionContext(db);
    const api = ingestionRoutes(ctx, testControl(ctx));
    const queued = await insertJob(db, "none.epub");
    const before = await (await api.request(`/jobs/${queued}`)).json();
    assert.equal(before.edition, null);
    await db.sql`delete from ingestion_jobs`;

    const epub = bigEpub(2, { paragraphs: 1 });
    const { jobId, editionId } = await ingest(db, ctx, "two.epub", epub);
    const body = await (await api.request(`/jobs/${jobId}`)).json();
    assert.equal(body.status, "Completed");
    assert.deepEqual(body.edition, {
      id: editionId,
      title: "Big Book",
      author: "Bench Writer",
      format: "epub",
      language: "en",
      direction: "ltr",
      warnings: [],
      chapter_count: 4,
      resource_count: 0,
    });

    // A Hebrew book whose chapter links to a missing file: stored and shown as a warning.
    const { zipEpub, CONTAINER, packageDocument, xhtml } = await import("../../_epub.ts");
    const hebrew = zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        metadata: "<dc:title>ספר</dc:title><dc:language>he</dc:language>",
        manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>',
        spine: '<itemref idref="c1"/>',
      }),
      "OEBPS/c1.xhtml": xhtml("x", '<h1>א</h1><p><a href="gone.xhtml">ב</a></p>'),
    });
    const second = await ingest(db, ctx, "he.epub", hebrew);
    const shown = await (await api.request(`/jobs/${second.jobId}`)).json();
    assert.deepEqual(
      [shown.edition.language, shown.edition.direction, shown.edition.warnings],
      ["he", "rtl", [{
        kind: "resource_missing",
        message: 'Link target "OEBPS/gone.xhtml" is not in the book; the link was removed',
      }]],
    );
  },
);

dbTest(
  "recover() rewrites an edition's resources from the database after a cut-short write",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { editionId, dir } = await ingest(db, ctx, "r7.epub", await Deno.readFile(R7));
    const image = await Deno.readFile(`${dir}/res/1-a.png`);
    // The process died between the commit and the end of the asset write.
    await Deno.remove(`${ctx.storageDir}/editions/${editionId}`, { recursive: true });
    await db.sql`update editions set assets_version = 0`;
    await ingestion.recover(ctx, new AbortController().signal);
    assert.deepEqual(await Deno.readFile(`${dir}/res/1-a.png`), image);
    assert.deepEqual(await checkWrittenLinks(dir), { checked: 3, broken: [] });
  },
);

dbTest(
  "run() re-ingesting an edition replaces its resources, language and warnings",
  async (db) => {
    const ctx = await ingestionContext(db);
    const first = await ingest(db, ctx, "r7.epub", await Deno.readFile(R7));
    const second = await ingest(
      db,
      ctx,
      "big.epub",
      bigEpub(20, { paragraphs: 1, imageBytes: 256 }),
      first.editionId,
    );
    assert.equal(second.editionId, first.editionId);
    const paths = await db.sql`
    select path from resources where edition_id = ${first.editionId} order by path`;
    assert.deepEqual(paths.map((row) => row.path), ["res/1-i10.png", "res/2-i20.png"]);
    assert.deepEqual([...Deno.readDirSync(`${second.dir}/res`)].map((e) => e.name).sort(), [
      "1-i10.png",
      "2-i20.png",
    ]);
  },
);

dbTest(
  "run() stores a Gutenberg book's licence with its edition, never in a chapter; a re-ingest replaces it",
  async (db) => {
    const ctx = await ingestionContext(db);
    const framed = await Deno.readFile(
      new URL("../../fixtures/cases/r20-crlf-lines.txt", import.meta.url),
    );
    const first = await ingest(db, ctx, "r20.txt", framed);
    const [edition] = await db.sql`select licence from editions where id = ${first.editionId}`;
    assert.match(edition.licence, /^\*\*\* END OF THE PROJECT GUTENBERG EBOOK/);
    assert.match(edition.licence, /set out in the licence that followed here\.$/);
    const chapters = await db.sql`
      select html from chapters where edition_id = ${first.editionId} order by position`;
    assert.equal(chapters.length, 3);
    for (const chapter of chapters) assert.doesNotMatch(chapter.html, /GUTENBERG|licence/);
    // The same edition re-read from a file with no frame: no licence any more.
    const plain = new TextEncoder().encode("CHAPTER 1\n\nText.\n\nCHAPTER 2\n\nMore.\n");
    const second = await ingest(db, ctx, "plain.txt", plain, first.editionId);
    const [after] = await db.sql`select licence from editions where id = ${second.editionId}`;
    assert.equal(after.licence, null);
  },
);

Deno.test("writeAssets() refuses a resource path that would leave the version folder", async () => {
  const storage = await Deno.makeTempDir({ prefix: "fidelity_test_" });
  try {
    for (const path of ["res/../../../escape.png", "../escape.png", "res/.hidden", "/tmp/x.png"]) {
      await assert.rejects(
        writeAssets(storage, "1", 1, [{ html: "<p>x</p>" }], [{ path, bytes: PNG }]),
        RangeError,
      );
    }
    assert.deepEqual([...Deno.readDirSync(storage)].map((entry) => entry.name), ["editions"]);
    assert.deepEqual([...Deno.readDirSync(`${storage}/editions/1`)], []);
  } finally {
    await Deno.remove(storage, { recursive: true });
  }
});

Deno.test("closeExtractor() after the fidelity tests", () => {
  closeExtractor();
});
