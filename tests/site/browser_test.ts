/**
 * The published site in a real browser: a real book (Alice's Adventures in Wonderland, EPUB, with
 * its pictures) ingested, given an SEO description, published and rendered by the ssg queue, then
 * served from 127.0.0.1 and opened in Debian's chromium driven by playwright-core. The edition
 * page and a chapter page must pass axe-core (no serious or critical violation) and html-validate
 * (its `standard` rules), carry `lang`, a viewport and the description, keep body-text lines to
 * at most 80 characters at 1280 px wide, and never scroll sideways at 375 px; the Arabic book of
 * the regression set is laid out right to left. Screenshots of both widths and of dark mode go to
 * `$TEST_OUTPUT_DIR/screenshots/` (default `.data/test-output/`).
 *
 * Needs /usr/bin/chromium (`apt-get install chromium`): skipped without it, failed without it
 * under CI=true.
 *
 * @module
 */
import assert from "node:assert/strict";
import { extname, join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { HtmlValidate } from "html-validate";
import * as ingestion from "../../queues/ingestion/mod.ts";
import * as ssg from "../../queues/ssg/mod.ts";
import * as ssgJobs from "../../queues/ssg/jobs.ts";
import { closeExtractor } from "../../books/extract.ts";
import { createLogger } from "../../lib/log.ts";
import { EventHub } from "../../lib/events.ts";
import { dbTest, type TestDb } from "../_db.ts";
import { ingestionContext, insertJob, jobRow } from "../_ingestion.ts";

const CHROMIUM = "/usr/bin/chromium";
const SHOTS = `${
  Deno.env.get("TEST_OUTPUT_DIR") ?? new URL("../../.data/test-output", import.meta.url).pathname
}/screenshots/`;
const BOOKS = new URL("../fixtures/books/", import.meta.url).pathname;
const AXE = new URL("../../node_modules/axe-core/axe.min.js", import.meta.url).pathname;
const DESCRIPTION =
  "Alice falls down a rabbit hole into a world of talking animals, a mad tea party and a queen.";
const MAX_LINE_CHARS = 80;

/** This test needs chromium (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["chromium"] } as const;

/** Ingest a book file of the regression set and publish it; returns its edition id. */
async function publish(db: TestDb, storageDir: string, name: string): Promise<string> {
  const ctx = await ingestionContext(db, { storageDir });
  await Deno.copyFile(join(BOOKS, name), join(storageDir, name));
  const jobId = await insertJob(db, name);
  const job = await ingestion.claim(ctx);
  assert.ok(job);
  await ingestion.run(ctx, job, new AbortController().signal);
  const row = await jobRow(db, jobId);
  assert.equal(row.status, "Completed", `${row.error}`);
  await db.sql`update editions set published_at = now() where id = ${row.edition_id}`;
  return row.edition_id!;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".gif": "image/gif",
  ".svg": "image/svg+xml",
  ".xml": "application/xml",
  ".txt": "text/plain; charset=utf-8",
};

/** Serve a directory on 127.0.0.1, as a static host would. */
function serve(root: string): { base: string; close(): Promise<void> } {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    let path = decodeURIComponent(new URL(req.url).pathname);
    if (path.endsWith("/")) path += "index.html";
    if (path.split("/").includes("..")) return new Response("no", { status: 400 });
    try {
      const body = await Deno.readFile(join(root, path));
      return new Response(body, {
        headers: { "content-type": TYPES[extname(path)] ?? "application/octet-stream" },
      });
    } catch {
      return new Response("not found", { status: 404 });
    }
  });
  return { base: `http://127.0.0.1:${server.addr.port}/`, close: () => server.shutdown() };
}

/** The page's serious and critical axe-core violations, as `id: help (n nodes)`. */
async function axeViolations(page: Page, source: string): Promise<string[]> {
  // Evaluated over the DevTools protocol, which the page's no-script CSP does not govern.
  await page.evaluate(source);
  const result = await page.evaluate(async () => {
    const axe = (globalThis as unknown as {
      axe: {
        run(): Promise<
          { violations: { id: string; impact: string; help: string; nodes: unknown[] }[] }
        >;
      };
    }).axe;
    return (await axe.run()).violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.length,
    }));
  });
  return result.filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.help} (${v.nodes} nodes)`);
}

/**
 * The longest rendered line of body text in `main`, in characters: every character of the text
 * in `p` and `li` elements is measured with a Range, and characters whose boxes share a top edge
 * are one line.
 */
async function longestLine(page: Page): Promise<{ chars: number; text: string }> {
  return await page.evaluate(() => {
    type Rect = { top: number; height: number };
    const doc = (globalThis as unknown as {
      document: {
        querySelectorAll(s: string): ArrayLike<{ childNodes: ArrayLike<unknown> }>;
        createRange(): {
          setStart(n: unknown, o: number): void;
          setEnd(n: unknown, o: number): void;
          getClientRects(): ArrayLike<Rect>;
        };
        createTreeWalker(root: unknown, what: number): { nextNode(): unknown };
      };
    }).document;
    let best = { chars: 0, text: "" };
    const blocks = Array.from(doc.querySelectorAll("main p, main li")).slice(0, 40);
    for (const block of blocks) {
      const walker = doc.createTreeWalker(block, 4 /* NodeFilter.SHOW_TEXT */);
      const lines = new Map<number, string>();
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = (node as { data: string }).data;
        for (let i = 0; i < text.length; i++) {
          const range = doc.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const rect = Array.from(range.getClientRects()).find((r) => r.height > 0);
          if (!rect) continue; // A collapsed space at a line's end.
          const top = Math.round(rect.top / 4);
          lines.set(top, (lines.get(top) ?? "") + text[i]);
        }
      }
      for (const line of lines.values()) {
        const trimmed = line.trim();
        if (trimmed.length > best.chars) best = { chars: trimmed.length, text: trimmed };
      }
    }
    return best;
  });
}

/** Whether the document is wider than the viewport (the reader would scroll sideways). */
async function scrollsSideways(page: Page): Promise<{ scroll: number; viewport: number }> {
  return await page.evaluate(() => {
    const root = (globalThis as unknown as {
      document: { documentElement: { scrollWidth: number; clientWidth: number } };
    }).document.documentElement;
    return { scroll: root.scrollWidth, viewport: root.clientWidth };
  });
}

async function headFacts(page: Page) {
  return await page.evaluate(() => {
    const doc = (globalThis as unknown as {
      document: {
        documentElement: { lang: string; dir: string };
        querySelector(s: string): { getAttribute(n: string): string | null } | null;
      };
    }).document;
    return {
      lang: doc.documentElement.lang,
      dir: doc.documentElement.dir,
      viewport: doc.querySelector('meta[name="viewport"]')?.getAttribute("content") ?? null,
      description: doc.querySelector('meta[name="description"]')?.getAttribute("content") ?? null,
    };
  });
}

async function launch(): Promise<Browser> {
  return await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
}

dbTest(
  "the published site in chromium: accessible, valid, a readable measure, no sideways scroll, dark mode",
  async (db) => {
    // Reached without chromium only under CI=true, where a missing package fails.
    await Deno.stat(CHROMIUM).catch(() => {
      throw new Error(
        `Cannot run the site browser test: ${CHROMIUM} is missing (apt-get install chromium)`,
      );
    });
    await Deno.mkdir(SHOTS, { recursive: true });
    const root = await Deno.makeTempDir({ prefix: "textstack-site-browser-" });
    const storageDir = join(root, "storage");
    await Deno.mkdir(storageDir);
    const alice = await publish(db, storageDir, "alice.epub");
    const arabic = await publish(db, storageDir, "regime-anticancer-arabic.epub");
    closeExtractor();
    // What the seo_backfill queue stores for an edition.
    await db.sql`update editions set meta_description = ${DESCRIPTION} where id = ${alice}`;
    const siteDir = join(root, "site");
    const ctx = {
      sql: db.sql,
      log: createLogger("silent"),
      bootId: crypto.randomUUID(),
      events: new EventHub(),
      storageDir,
      siteDir,
      siteUrl: "https://books.example/",
    };
    await ssgJobs.enqueue(db.sql);
    const job = await ssg.claim(ctx);
    assert.ok(job);
    await ssg.run(ctx, job, new AbortController().signal);

    const site = serve(await Deno.realPath(siteDir));
    const browser = await launch();
    const axe = await Deno.readTextFile(AXE);
    const validator = new HtmlValidate({ extends: ["html-validate:standard"] });
    try {
      // A chapter with a picture: the one whose file shows an <img>.
      const [{ position }] = await db.sql<{ position: number }[]>`
      select position from chapters where edition_id = ${alice} and html like '%<img%'
      order by length(html) desc limit 1`;
      const pages = {
        edition: `editions/${alice}/index.html`,
        chapter: `editions/${alice}/${position}.html`,
      };
      for (const [name, path] of Object.entries(pages)) {
        const markup = await Deno.readTextFile(join(siteDir, path));
        const report = await validator.validateString(markup, path);
        const messages = report.results.flatMap((r) =>
          r.messages.map((m) => `${m.ruleId} ${m.line}:${m.column} ${m.message}`)
        );
        assert.deepEqual(messages, [], `${name} page is not valid HTML`);

        for (const dark of [false, true]) {
          for (const width of [1280, 375]) {
            const page = await browser.newPage({
              viewport: { width, height: 900 },
              colorScheme: dark ? "dark" : "light",
            });
            const refused: string[] = [];
            page.on("console", (msg) => {
              if (/Content Security Policy|Refused to/i.test(msg.text())) refused.push(msg.text());
            });
            const response = await page.goto(`${site.base}${path}`);
            assert.equal(response?.status(), 200);
            await page.waitForLoadState("load");
            const label = `${name} ${width}px${dark ? " dark" : ""}`;
            assert.deepEqual(refused, [], `${label}: the CSP refused the site's own files`);
            const facts = await headFacts(page);
            assert.match(facts.lang, /^en(-|$)/, label);
            assert.deepEqual(facts, {
              lang: facts.lang,
              dir: "ltr",
              viewport: "width=device-width, initial-scale=1",
              description: DESCRIPTION,
            }, label);
            assert.deepEqual(await axeViolations(page, axe), [], `${label}: axe-core`);
            if (width === 1280) {
              const line = await longestLine(page);
              assert.ok(line.chars > 30, `${label}: no body text was measured`);
              assert.ok(
                line.chars <= MAX_LINE_CHARS,
                `${label}: a line of ${line.chars} characters: "${line.text}"`,
              );
            } else {
              const { scroll, viewport } = await scrollsSideways(page);
              assert.ok(scroll <= viewport, `${label}: ${scroll} px wide in a ${viewport} px view`);
            }
            await page.screenshot({
              path: `${SHOTS}site-${name}-${width}${dark ? "-dark" : ""}.png`,
              fullPage: false,
            });
            await page.close();
          }
        }
      }
      // Right to left.
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`${site.base}editions/${arabic}/1.html`);
      const facts = await headFacts(page);
      assert.match(facts.lang, /^ar(-|$)/);
      assert.equal(facts.dir, "rtl");
      assert.deepEqual(await axeViolations(page, axe), [], "the Arabic chapter: axe-core");
      await page.screenshot({ path: `${SHOTS}site-chapter-rtl-1280.png` });
      await page.close();
    } finally {
      await browser.close();
      await site.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  },
  REQUIRES,
);
