/**
 * Resources are what their bytes are (books/resource_types.ts): whatever a book's manifest
 * declares, an image is stored as an image under its real type's extension, an SVG is sanitised,
 * and HTML, script or unknown bytes are dropped with a warning; and once such a book is ingested
 * and published, nothing scriptable reaches the site directory, whose pages forbid script.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileTypeFromBuffer } from "file-type";
import { closeExtractor, extractBook, type ExtractedBook } from "../../books/extract.ts";
import { vetResource } from "../../books/resource_types.ts";
import * as ingestion from "../../queues/ingestion/mod.ts";
import * as ssg from "../../queues/ssg/mod.ts";
import * as ssgJobs from "../../queues/ssg/jobs.ts";
import { dbTest } from "../_db.ts";
import { CONTAINER, packageDocument, PNG, xhtml, zipEpub } from "../_epub.ts";
import { ingestionContext, insertJob, jobRow } from "../_ingestion.ts";
import { snapshot } from "../_ssg.ts";
import { createLogger } from "../../lib/log.ts";
import { EventHub } from "../../lib/events.ts";

const encode = (text: string) => new TextEncoder().encode(text);

/** A minimal GIF89a (1×1): a real image declared as something else below. */
const GIF = Uint8Array.from(
  atob("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"),
  (c) => c.charCodeAt(0),
);

const HTML_PAGE =
  "<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>";
const SCRIPTED_SVG = '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" ' +
  'onload="alert(1)" width="10" height="10"><script>alert(2)</script>' +
  '<a href="javascript:alert(3)"><rect width="10" height="10"/></a></svg>';

/** Every lie a manifest can tell, as `[file name, declared type, bytes]`. */
const LIES: ReadonlyArray<[string, string, Uint8Array]> = [
  ["page.png", "image/png", encode(HTML_PAGE)],
  ["drawing.jpg", "image/jpeg", encode(SCRIPTED_SVG)],
  ["params.svg", "image/svg+xml; charset=utf-8", encode(SCRIPTED_SVG)],
  ["plain.svg", "image/svg+xml", encode(SCRIPTED_SVG)],
  ["really-gif.png", "image/png", GIF],
  ["script.png", "image/png", encode("alert(document.domain);\n")],
  ["noise.webp", "image/webp", Uint8Array.from({ length: 512 }, (_, i) => (i * 7919) % 251)],
  ["honest.png", "image/png", PNG],
];

/** What is scriptable in a file a browser might render. */
const SCRIPTABLE = /<script|\son[a-z]+\s*=|javascript:|<html|<!doctype html/i;

function lyingEpub(): Uint8Array {
  const manifest = LIES.map(([name, type], i) =>
    `<item id="r${i}" href="res/${name}" media-type="${type}"/>`
  ).join("");
  const images = LIES.map(([name]) => `<img src="res/${name}" alt="${name}"/>`).join("");
  const files: Record<string, string | Uint8Array> = {
    "META-INF/container.xml": CONTAINER,
    "OEBPS/content.opf": packageDocument({
      manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>' + manifest,
      spine: '<itemref idref="c1"/>',
    }),
    "OEBPS/c1.xhtml": xhtml("Lies", `<h1>Lies</h1><p>Pictures: ${images}</p>`),
  };
  for (const [name, , bytes] of LIES) files[`OEBPS/res/${name}`] = bytes;
  return zipEpub(files);
}

/** Each resource's bytes are of the type its path's extension and its media type name. */
async function assertTruthful(book: ExtractedBook): Promise<void> {
  for (const resource of book.resources ?? []) {
    const extension = resource.path.slice(resource.path.lastIndexOf(".") + 1);
    const text = new TextDecoder().decode(resource.bytes);
    assert.doesNotMatch(text, SCRIPTABLE, `${resource.path} is scriptable`);
    if (extension === "svg") {
      assert.equal(resource.mediaType, "image/svg+xml");
      assert.match(text, /<svg[\s>]/);
      continue;
    }
    const sniffed = await fileTypeFromBuffer(resource.bytes);
    assert.equal(sniffed?.ext, extension, resource.path);
    assert.equal(sniffed?.mime, resource.mediaType, resource.path);
  }
}

Deno.test("vetResource() reads the type from the bytes whatever they are", async () => {
  assert.deepEqual(await vetResource(PNG), {
    mediaType: "image/png",
    extension: "png",
    bytes: PNG,
  });
  assert.equal((await vetResource(GIF))?.extension, "gif");
  for (
    const refused of [
      HTML_PAGE,
      "alert(1)",
      "",
      "<html><svg></svg></html>",
      "<?xml version='1.0'?><x/>",
    ]
  ) {
    assert.equal(await vetResource(encode(refused)), null, refused);
  }
  const svg = await vetResource(encode(SCRIPTED_SVG));
  assert.equal(svg?.mediaType, "image/svg+xml");
  assert.doesNotMatch(new TextDecoder().decode(svg!.bytes), SCRIPTABLE);
  // A prefixed root, UTF-16 with a byte-order mark.
  const utf16 = new Uint8Array([
    0xff,
    0xfe,
    ...new Uint8Array(
      Uint16Array.from(
        '<s:svg xmlns:s="http://www.w3.org/2000/svg"><script>x</script></s:svg>',
        (c) => c.charCodeAt(0),
      ).buffer,
    ),
  ]);
  const prefixed = await vetResource(utf16);
  assert.equal(prefixed?.extension, "svg");
  assert.doesNotMatch(new TextDecoder().decode(prefixed!.bytes), SCRIPTABLE);
});

Deno.test("extractBook() stores a lying EPUB's resources as what they are, and drops HTML and script", async () => {
  const dir = await Deno.makeTempDir({ prefix: "resource_types_test_" });
  try {
    const path = join(dir, "lies.epub");
    await Deno.writeFile(path, lyingEpub());
    const book = await extractBook(path, new AbortController().signal);
    await assertTruthful(book);
    const paths = (book.resources ?? []).map((r) => r.path).sort();
    assert.deepEqual(paths, [
      "res/2-drawing.svg",
      "res/3-params.svg",
      "res/4-plain.svg",
      "res/5-really-gif.gif",
      "res/8-honest.png",
    ]);
    const dropped = (book.warnings ?? []).filter((w) =>
      /is not an image, audio, video or SVG/.test(w.message)
    );
    assert.deepEqual(dropped.map((w) => w.message.match(/"(res\/[^"]+)"/)?.[1]).sort(), [
      "res/1-page.png",
      "res/6-script.png",
      "res/7-noise.webp",
    ]);
    assert.ok(dropped.every((w) => w.kind === "resource_missing"));
    // Every reference left in the chapter names a stored file; the dropped ones are gone.
    const html = book.chapters.map((c) => c.html).join("");
    const refs = [...html.matchAll(/="(res\/[^"#]+)/g)].map((m) => m[1]).sort();
    assert.deepEqual(refs, paths);
    // A dropped image says what it showed.
    assert.match(html, /Pictures: page\.png<img /);
    assert.ok(!html.includes('page.png"'), "no image of a dropped file is left");
  } finally {
    closeExtractor();
    await Deno.remove(dir, { recursive: true });
  }
});

dbTest(
  "run() publishes a lying EPUB with nothing scriptable in the site directory, every page under a no-script CSP",
  async (db) => {
    const ctx = await ingestionContext(db);
    await Deno.writeFile(join(ctx.storageDir, "lies.epub"), lyingEpub());
    const jobId = await insertJob(db, "lies.epub");
    const job = await ingestion.claim(ctx);
    assert.ok(job);
    await ingestion.run(ctx, job, new AbortController().signal);
    closeExtractor();
    const row = await jobRow(db, jobId);
    assert.equal(row.status, "Completed", `${row.error}`);
    await db.sql`update editions set published_at = now() where id = ${row.edition_id}`;
    // A file stored by an older version, before resources were vetted: the site vets it again.
    const [{ asset_version }] = await db.sql`
    select asset_version from editions where id = ${row.edition_id}`;
    const assets = join(ctx.storageDir, "editions", row.edition_id!, `v${asset_version}`, "res");
    await Deno.writeTextFile(join(assets, "9-old.png"), HTML_PAGE);
    await Deno.writeTextFile(join(assets, "10-old.svg"), SCRIPTED_SVG);

    const siteDir = join(ctx.storageDir, "..", `site-${crypto.randomUUID()}`);
    const ssgCtx = {
      sql: db.sql,
      log: createLogger("silent"),
      bootId: crypto.randomUUID(),
      events: new EventHub(),
      storageDir: ctx.storageDir,
      siteDir,
      siteUrl: "https://books.example/",
    };
    await ssgJobs.enqueue(db.sql);
    const rebuild = await ssg.claim(ssgCtx);
    assert.ok(rebuild);
    await ssg.run(ssgCtx, rebuild, new AbortController().signal);

    const files = await snapshot(siteDir);
    const published = [...files.keys()].filter((p) => p.includes("/res/")).sort();
    assert.deepEqual(published.map((p) => p.replace(/^.*\/res\//, "")), [
      "10-old.svg",
      "2-drawing.svg",
      "3-params.svg",
      "4-plain.svg",
      "5-really-gif.gif",
      "8-honest.png",
    ]);
    for (const [path, bytes] of files) {
      const text = new TextDecoder().decode(bytes);
      if (path.endsWith(".html")) {
        assert.doesNotMatch(text, /<script|\son[a-z]+\s*=|javascript:/i, path);
        assert.match(
          text,
          /<meta http-equiv="Content-Security-Policy" content="[^"]*script-src (?:'|&#39;)none(?:'|&#39;)/,
          path,
        );
      } else {
        assert.doesNotMatch(text, SCRIPTABLE, path);
      }
    }
    await Deno.remove(siteDir, { recursive: true }).catch(() => {});
    await Deno.remove(`${siteDir}.builds`, { recursive: true }).catch(() => {});
  },
);
