/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core, against a real
 * `main.ts` process. It fails (never skips) when /usr/bin/chromium is missing: `.ci/run`
 * installs it. Screenshots of each page go to `.data/test-output/screenshots/`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { dbTest, waitFor } from "./_db.ts";
import { postJson, spawnWorker, TEST_TOKEN } from "./_worker.ts";
import { SMALL_BOOK } from "./_ingestion.ts";

const CHROMIUM = "/usr/bin/chromium";
const SHOTS = new URL("../.data/test-output/screenshots/", import.meta.url).pathname;
// Extraction runs in a Web Worker whose first start can be slow on a loaded machine.
const JOB_MS = 120_000;

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
  try {
    // A cold start on a loaded machine can take a while; the test waits up to a minute.
    const listening = await worker.waitForLog("http listening", {}, 60_000);
    const base = `http://127.0.0.1:${listening.port}`;
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    await page.goto(`${base}/admin`);
    assert.match(page.url(), /\/admin\/login$/);
    await page.screenshot({ path: `${SHOTS}login.png` });
    await page.getByLabel(/Token/).fill(TEST_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${base}/admin`);
    await page.locator('[data-queue="ingestion"]').waitFor();

    // A job appears and completes on the open queue page, without a reload.
    await page.getByRole("link", { name: "ingestion", exact: true }).first().click();
    await page.waitForURL(`${base}/admin/queues/ingestion`);
    await page.waitForSelector("body[data-live=ready]");
    await Deno.writeTextFile(`${storage}/book.txt`, SMALL_BOOK);
    const created = await (await postJson(`${base}/internal/ingestion/jobs`, {
      source_path: "book.txt",
    })).json();
    const row = page.locator(`tr[data-job="${created.id}"]`);
    await row.waitFor({ timeout: 15_000 });
    await page.locator(`tr[data-job="${created.id}"][data-status="Completed"]`)
      .waitFor({ timeout: JOB_MS });
    await page.screenshot({ path: `${SHOTS}queue.png`, fullPage: true });

    // A file the reader refuses fails; fixed, a retry from its page runs it to Completed.
    await Deno.writeTextFile(`${storage}/bad.txt`, "CHAPTER I\n\nbroken\u0000text\n");
    const bad = await (await postJson(`${base}/internal/ingestion/jobs`, {
      source_path: "bad.txt",
    })).json();
    await page.locator(`tr[data-job="${bad.id}"][data-status="Failed"]`)
      .waitFor({ timeout: JOB_MS });
    await page.getByRole("link", { name: `#${bad.id}`, exact: true }).click();
    await page.waitForSelector("body[data-live=ready]");
    const retry = page.getByRole("button", { name: `Retry job #${bad.id}` });
    await retry.waitFor();
    await page.screenshot({ path: `${SHOTS}job-failed.png`, fullPage: true });
    await Deno.writeTextFile(`${storage}/bad.txt`, SMALL_BOOK);
    await retry.focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(/retried=1$/);
    await page.waitForSelector("body[data-live=ready]");
    await page.locator('[data-status="Completed"]').waitFor({ timeout: JOB_MS });
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
  } finally {
    await browser.close();
    worker.child.kill("SIGTERM");
    await worker.exited;
    await Deno.remove(storage, { recursive: true });
  }
});
