import assert from "node:assert/strict";
import { join } from "node:path";
import * as ssg from "../../../queues/ssg/mod.ts";
import * as ssgJobs from "../../../queues/ssg/jobs.ts";
import { buildsDir } from "../../../site/builds.ts";
import { keepResolvableRefs } from "../../../site/render.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { checkLinks, insertEdition, snapshot, ssgContext, ssgJob } from "../../_ssg.ts";
import { PNG } from "../../_epub.ts";

/** The start of a JPEG file (SOI and a JFIF APP0 marker): what a type sniffer reads. */
const JPEG = Uint8Array.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00]);

type Ctx = Awaited<ReturnType<typeof ssgContext>>;

/** Queue and claim a rebuild, then run it to its end. */
async function rebuild(ctx: Ctx, signal = new AbortController().signal) {
  await ssgJobs.enqueue(ctx.sql);
  const job = await ssg.claim(ctx);
  assert.ok(job, "a queued rebuild was claimed");
  await ssg.run(ctx, job, signal);
  return job;
}

/** Two published editions (one with images and broken references), one unpublished. */
async function library(db: TestDb, ctx: Ctx) {
  const first = await insertEdition(db, ctx.storageDir, {
    title: "Tom & Jerry <script>alert(1)</script>",
    author: 'A. "Quoted" <Author>',
    chapters: [
      {
        title: "One <b>",
        html: '<p>Look: <img src="images/fig%201.png" alt="fig" /> and ' +
          '<img src="missing.png" alt="gone" /></p><p><a href="ch02.xhtml">next file</a> ' +
          '<a href="2.html#x">two</a> <a href="https://example.org/">out</a></p>',
      },
      { title: "Two", html: '<p id="x">Second. <img src="./cover.jpg" alt="c" /></p>' },
      { title: "Three", html: "<p>Third.</p>" },
    ],
    assets: { "images/fig 1.png": PNG, "cover.jpg": JPEG, "index.html": "not a page" },
  });
  // A symlink in the asset folder must not publish what it points to, even a real image (a file
  // of its type passes every other check).
  const privateImage = join(await Deno.makeTempDir({ prefix: "textstack-private-" }), "p.png");
  await Deno.writeFile(privateImage, PNG);
  await Deno.symlink(privateImage, join(ctx.storageDir, "editions", first, "v1", "leak.png"));
  const second = await insertEdition(db, ctx.storageDir, {
    title: "Second Book",
    chapters: [{ title: "Only", html: "<p>Alone.</p>" }],
  });
  const hidden = await insertEdition(db, ctx.storageDir, {
    title: "Draft",
    chapters: [{ title: "Secret", html: "<p>Unpublished.</p>" }],
    published: false,
  });
  return { first, second, hidden };
}

dbTest("run() builds a site whose every internal href and src resolves to a file", async (db) => {
  const ctx = await ssgContext(db);
  const { first, second, hidden } = await library(db, ctx);
  const job = await rebuild(ctx);
  assert.equal((await ssgJob(db, job.id)).status, "Completed");

  const { pages, refs, broken } = await checkLinks(ctx.siteDir);
  assert.deepEqual(broken, []);
  assert.ok(refs.filter((r) => r.attr === "src").length >= 2, "images were checked");
  assert.ok(refs.length > 20, `only ${refs.length} references`);
  assert.deepEqual(pages, [
    `editions/${first}/1.html`,
    `editions/${first}/2.html`,
    `editions/${first}/3.html`,
    `editions/${first}/index.html`,
    `editions/${second}/1.html`,
    `editions/${second}/index.html`,
    "index.html",
  ]);
  const files = await snapshot(ctx.siteDir);
  assert.deepEqual(files.get(`editions/${first}/images/fig 1.png`), PNG);
  assert.ok(!files.has(`editions/${first}/leak.png`), "a symlinked asset was published");
  assert.ok(![...files.keys()].some((p) => p.startsWith(`editions/${hidden}/`)));

  const chapter1 = new TextDecoder().decode(files.get(`editions/${first}/1.html`));
  assert.ok(!chapter1.includes("missing.png") && !chapter1.includes("ch02.xhtml"));
  assert.ok(chapter1.includes("next file"), "an unwrapped link keeps its text");
  assert.ok(chapter1.includes('href="2.html#x"') && chapter1.includes('rel="next"'));
  const edition = new TextDecoder().decode(files.get(`editions/${first}/index.html`));
  assert.ok(!edition.includes("<script>"), "the title is escaped");
  assert.ok(edition.includes("Tom &amp; Jerry &lt;script&gt;"));
  assert.ok(edition.includes("&lt;Author&gt;"));
  assert.equal(
    new TextDecoder().decode(files.get(`editions/${first}/index.html`)).includes("not a page"),
    false,
  );
  const last = new TextDecoder().decode(files.get(`editions/${first}/3.html`));
  assert.ok(last.includes('rel="prev"') && !last.includes('rel="next"'));
});

dbTest("run() writes a sitemap listing every page by absolute URL, and robots.txt", async (db) => {
  const ctx = await ssgContext(db);
  await library(db, ctx);
  await rebuild(ctx);
  const files = await snapshot(ctx.siteDir);
  const xml = new TextDecoder().decode(files.get("sitemap.xml"));
  const urls = [...xml.matchAll(/<loc>([^<]*)<\/loc>/g)].map((m) => m[1]);
  const listed = urls.map((url) => {
    assert.ok(url.startsWith(ctx.siteUrl), `${url} is not under SITE_URL`);
    const path = url.slice(ctx.siteUrl.length);
    return path === "" || path.endsWith("/") ? `${path}index.html` : path;
  }).sort();
  const pages = [...files.keys()].filter((p) => p.endsWith(".html")).sort();
  assert.deepEqual(listed, pages);
  assert.equal(
    new TextDecoder().decode(files.get("robots.txt")),
    `User-agent: *\nAllow: /\n\nSitemap: ${ctx.siteUrl}sitemap.xml\n`,
  );
});

dbTest(
  "run() cancelled halfway leaves the previous site byte-identical and removes its unfinished build",
  async (db) => {
    const abort = new AbortController();
    let armed = false;
    let written = 0;
    const ctx = await ssgContext(db, {
      onFile: () => {
        if (armed && ++written === 3) abort.abort(new Error("Shutting down"));
      },
    });
    await library(db, ctx);
    const before = await rebuild(ctx, new AbortController().signal);
    const site = await snapshot(ctx.siteDir);
    const link = await Deno.readLink(ctx.siteDir);
    await insertEdition(db, ctx.storageDir, {
      title: "Newly Published",
      chapters: [{ title: "New", html: "<p>New.</p>" }],
    });

    armed = true;
    await ssgJobs.enqueue(ctx.sql);
    const job = await ssg.claim(ctx);
    assert.ok(job);
    await assert.rejects(ssg.run(ctx, job, abort.signal), /Shutting down/);
    assert.ok(written >= 3, "the render was halfway");
    assert.equal(await Deno.readLink(ctx.siteDir), link);
    assert.deepEqual(await snapshot(ctx.siteDir), site);
    assert.deepEqual(
      [...Deno.readDirSync(buildsDir(ctx.siteDir))].map((e) => e.name),
      [before.id],
      "only the live build is left",
    );
    // The run settles nothing on shutdown: the consumer gives the claim back.
    assert.equal((await ssgJob(db, job.id)).status, "Running");
    assert.equal(await ssg.giveBack(ctx, job), true);
    const row = await ssgJob(db, job.id);
    assert.deepEqual([row.status, row.attempt_count, row.error], ["Queued", 0, null]);
  },
);

dbTest(
  "run() switches the live link atomically, keeps the previous build, prunes older",
  async (db) => {
    const ctx = await ssgContext(db);
    await library(db, ctx);
    const a = await rebuild(ctx);
    assert.equal(await Deno.readLink(ctx.siteDir), `site.builds/${a.id}`);
    const b = await rebuild(ctx);
    assert.equal(await Deno.readLink(ctx.siteDir), `site.builds/${b.id}`);
    await Deno.mkdir(join(buildsDir(ctx.siteDir), ".tmp-crashed"));
    const c = await rebuild(ctx);
    assert.equal(await Deno.readLink(ctx.siteDir), `site.builds/${c.id}`);
    assert.deepEqual(
      [...Deno.readDirSync(buildsDir(ctx.siteDir))].map((e) => e.name).sort(),
      [b.id, c.id].sort(),
    );
    // No switch leftovers beside SITE_DIR.
    assert.deepEqual(
      [...Deno.readDirSync(join(ctx.siteDir, ".."))].map((e) => e.name).sort(),
      ["site", "site.builds", "storage"],
    );
  },
);

dbTest(
  "run() fails the job with a readable reason when SITE_DIR is a real directory",
  async (db) => {
    const ctx = await ssgContext(db);
    await Deno.mkdir(ctx.siteDir);
    await Deno.writeTextFile(`${ctx.siteDir}/old.html`, "old");
    const job = await rebuild(ctx);
    const row = await ssgJob(db, job.id);
    assert.equal(row.status, "Failed");
    assert.match(
      row.error!,
      /^Cannot rebuild the site: .*SITE_DIR ".*" is not a symlink to a build/,
    );
    assert.equal(await Deno.readTextFile(`${ctx.siteDir}/old.html`), "old");
    assert.deepEqual([...Deno.readDirSync(buildsDir(ctx.siteDir))], []);
  },
);

Deno.test("keepResolvableRefs() keeps the HTML unchanged when every reference resolves", () => {
  const html = '<p><img src="a.png" alt="" /> <a href="#n">n</a> <a href="mailto:x@y.z">m</a></p>';
  assert.deepEqual(keepResolvableRefs(html, "editions/1/1.html", new Set(["editions/1/a.png"])), {
    html,
    dropped: 0,
  });
  const out = keepResolvableRefs(
    '<p><a href="../2/1.html">other book</a><img src="/etc/passwd" /></p>',
    "editions/1/1.html",
    new Set(),
  );
  assert.deepEqual(out, { html: "<p>other book</p>", dropped: 2 });
});
