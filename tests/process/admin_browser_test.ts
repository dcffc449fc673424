/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core, against a real
 * `main.ts` process. Where /usr/bin/chromium is missing it is skipped, saying so, and under
 * `CI=true` it fails instead: `.ci/run`
 * installs it. A screenshot of each page goes to `$TEST_OUTPUT_DIR/screenshots/` (default
 * `.data/test-output/`, which git ignores).
 *
 * The pages' Content-Security-Policy allows only the dashboard's own files: the style must apply
 * and nothing may be refused (the browser says so on the console).
 *
 * "Live" is checked, not assumed: a marker set on the page before a change must still be there
 * when the change shows (the page was updated in place, never reloaded), and the retried job is
 * held `Processing` on a FIFO until the test writes the book, so the page must show it run.
 *
 * @module
 */
import assert from "node:assert/strict";
import { chromium, type Page } from "playwright-core";
import { dbTest, waitFor } from "../_db.ts";
import { postJson, spawnWorker, TEST_TOKEN } from "../_worker.ts";
import { SMALL_BOOK } from "../_ingestion.ts";
import { mkfifo, releaseFifo } from "../_fs.ts";

/** These tests need chromium (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["chromium"] } as const;

const CHROMIUM = "/usr/bin/chromium";
// Where the screenshots go: $TEST_OUTPUT_DIR/screenshots/.
const SHOTS = `${
  Deno.env.get("TEST_OUTPUT_DIR") ??
    new URL("../../.data/test-output", import.meta.url).pathname
}/screenshots/`;
// Extraction runs in a Web Worker whose first start can be slow on a loaded machine.
const JOB_MS = 120_000;
const WORKER_QUEUES = ["ingestion", "user_ingestion", "enrichment", "ssg"];
const HOST_QUEUES = ["auto_publish", "seo_backfill"];

// Mark the page; `unreloaded` is true only while the same document is still shown.
const mark = (page: Page) => page.evaluate(() => void ((globalThis as { mark?: 1 }).mark = 1));
const unreloaded = (page: Page) => page.evaluate(() => (globalThis as { mark?: 1 }).mark === 1);

dbTest("/admin in chromium: log in, watch a job complete live, retry a failed job", async (db) => {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `Cannot run the browser test: ${CHROMIUM} is missing (apt-get install chromium)`,
    );
  }
  await Deno.mkdir(SHOTS, { recursive: true });
  const storage = await Deno.makeTempDir({ prefix: "textstack-admin-" });
  const worker = spawnWorker(db, { STORAGE_DIR: storage, STATS_INTERVAL_MS: "300" });
  const browser = await chromium.launch({
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
  const fifo = `${storage}/bad.txt`;
  try {
    // A cold start on a loaded machine can take a while; the test waits up to a minute.
    const listening = await worker.waitForLog("http listening", {}, 60_000);
    const base = `http://127.0.0.1:${listening.port}`;
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    // The pages' CSP allows only this origin's files: anything it blocks says so here.
    const refused: string[] = [];
    page.on("console", (msg) => {
      if (/Content Security Policy|Refused to/i.test(msg.text())) refused.push(msg.text());
    });
    await page.goto(`${base}/admin`);
    assert.match(page.url(), /\/admin\/login$/);
    // The served style sheet applies under the CSP (the header's colour is the sheet's).
    assert.equal(
      await page.locator("header").evaluate((el) =>
        // Runs in the page, where getComputedStyle exists (Deno's types lack the DOM).
        (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } })
          .getComputedStyle(el).backgroundColor
      ),
      "rgb(31, 42, 68)",
    );
    await page.screenshot({ path: `${SHOTS}login.png` });
    await page.getByLabel(/Token/).fill(TEST_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${base}/admin`);

    // Every queue is on the overview: the four this process consumes hold their lock here.
    for (const queue of WORKER_QUEUES) {
      const lock = page.locator(`[data-queue="${queue}"] [data-lock]`);
      await waitFor(
        `the overview to show this process holding the ${queue} lock`,
        async () => {
          await page.reload();
          return /this process/.test(await lock.textContent() ?? "");
        },
        30_000,
        200,
      );
    }
    for (const queue of HOST_QUEUES) {
      assert.match(
        await page.locator(`[data-queue="${queue}"] [data-lock]`).textContent() ?? "",
        /host poller/,
      );
    }

    // A job appears and completes on the open queue page, without a reload.
    await page.getByRole("link", { name: "ingestion", exact: true }).first().click();
    await page.waitForURL(`${base}/admin/queues/ingestion`);
    await page.waitForSelector("body[data-live=ready]");
    await mark(page);
    await Deno.writeTextFile(`${storage}/book.txt`, SMALL_BOOK);
    const created = await (await postJson(`${base}/internal/ingestion/jobs`, {
      source_path: "book.txt",
    })).json();
    await page.locator(`tr[data-job="${created.id}"]`).waitFor({ timeout: 15_000 });
    await page.locator(`tr[data-job="${created.id}"][data-status="Completed"]`)
      .waitFor({ timeout: JOB_MS });
    assert.ok(await unreloaded(page), "the queue page reloaded instead of updating in place");
    await page.screenshot({ path: `${SHOTS}queue.png`, fullPage: true });

    // A file the reader refuses fails, live too.
    await Deno.writeTextFile(fifo, "CHAPTER I\n\nbroken\u0000text\n");
    const bad = await (await postJson(`${base}/internal/ingestion/jobs`, {
      source_path: "bad.txt",
    })).json();
    await page.locator(`tr[data-job="${bad.id}"][data-status="Failed"]`)
      .waitFor({ timeout: JOB_MS });
    assert.ok(await unreloaded(page));
    await page.getByRole("link", { name: `#${bad.id}`, exact: true }).click();
    await page.waitForSelector("body[data-live=ready]");
    const retry = page.getByRole("button", { name: `Retry job #${bad.id}` });
    await retry.waitFor();
    await page.screenshot({ path: `${SHOTS}job-failed.png`, fullPage: true });

    // Retried from the keyboard, it runs: held Processing on a FIFO with no writer, then fed
    // the book, it completes on the open page.
    await Deno.remove(fifo);
    await mkfifo(fifo);
    await retry.focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(/retried=1$/);
    await page.waitForSelector("body[data-live=ready]");
    const status = page.locator("#job [data-status]");
    await page.locator('#job [data-status="Processing"]').waitFor({ timeout: JOB_MS });
    await mark(page);
    await Deno.writeTextFile(fifo, SMALL_BOOK);
    await page.locator('#job [data-status="Completed"]').waitFor({ timeout: JOB_MS });
    assert.ok(await unreloaded(page), "the job page reloaded instead of updating in place");
    assert.equal(await status.textContent(), "Completed");
    assert.equal(await page.getByRole("button", { name: /Retry job/ }).count(), 0);
    await page.getByRole("table").filter({ hasText: "Chapter" }).waitFor();
    await page.screenshot({ path: `${SHOTS}job.png`, fullPage: true });

    // The overview's counts come from the background count (every 300 ms here).
    const completed = page.locator('[data-queue="ingestion"] [data-count="Completed"]');
    await waitFor(
      "the overview to count 2 completed jobs",
      async () => {
        await page.goto(`${base}/admin`);
        return (await completed.textContent()) === "2";
      },
      15_000,
      200,
    );
    await page.screenshot({ path: `${SHOTS}overview.png`, fullPage: true });
    assert.deepEqual(refused, [], "the CSP blocked part of the dashboard");
  } finally {
    // Nobody may be left waiting on the FIFO (a run, or this test's own write).
    await releaseFifo(fifo).catch(() => {});
    await browser.close();
    worker.child.kill("SIGTERM");
    await worker.exited;
    await Deno.remove(storage, { recursive: true });
  }
}, REQUIRES);
