/**
 * The dashboard's operator actions in a real browser (Debian's chromium through playwright-core,
 * as tests/process/admin_browser_test.ts), against a real `main.ts`: pause and resume a queue,
 * search it, bulk-retry the matching `Failed` jobs after the count is shown, cancel a queued job,
 * and read its attempt history. Each state change is a same-origin form post: the same post from
 * another origin is refused even with the session cookie. Needs chromium (tests/_requires.ts:
 * ignored where it is missing, saying how to install it; run, so failing, under CI=true).
 *
 * Screenshots go to `$TEST_OUTPUT_DIR/screenshots/` (default `.data/test-output/`); docs/ holds
 * copies (docs/operations.md).
 *
 * @module
 */
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { dbTest, waitFor } from "../_db.ts";
import { postJson, spawnWorker, TEST_TOKEN } from "../_worker.ts";

const CHROMIUM = "/usr/bin/chromium";
const SHOTS = `${
  Deno.env.get("TEST_OUTPUT_DIR") ??
    new URL("../../.data/test-output", import.meta.url).pathname
}/screenshots/`;
const JOB_MS = 120_000;

dbTest(
  "/admin in chromium: pause and resume, search, bulk retry after its count, cancel a queued job, its attempt history; other origins refused",
  async (db) => {
    try {
      await Deno.stat(CHROMIUM);
    } catch {
      throw new Error(
        `Cannot run the browser test: ${CHROMIUM} is missing (apt-get install chromium)`,
      );
    }
    await Deno.mkdir(SHOTS, { recursive: true });
    const storage = await Deno.makeTempDir({ prefix: "textstack-admin-ops-" });
    const data = await Deno.makeTempDir({ prefix: "textstack-admin-ops-data-" });
    const worker = spawnWorker(db, {
      STORAGE_DIR: storage,
      DATA_DIR: data,
      SITE_DIR: `${data}/site`,
      STATS_INTERVAL_MS: "300",
    });
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
    });
    try {
      const base = await worker.baseUrl();
      const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
      const refused: string[] = [];
      page.on("console", (msg) => {
        if (/Content Security Policy|Refused to/i.test(msg.text())) refused.push(msg.text());
      });
      await page.goto(`${base}/admin/login`);
      await page.getByLabel(/Token/).fill(TEST_TOKEN);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(`${base}/admin`);

      // Two books the reader refuses: they fail on their first attempt.
      const ids: string[] = [];
      for (const name of ["moby-bad.txt", "emma-bad.txt"]) {
        await Deno.writeTextFile(`${storage}/${name}`, "CHAPTER I\n\nbroken\u0000text\n");
        ids.push(
          (await (await postJson(`${base}/internal/ingestion/jobs`, {
            source_path: name,
          })).json()).id,
        );
      }
      const [moby, emma] = ids;
      await page.goto(`${base}/admin/queues/ingestion?status=Failed`);
      for (const id of ids) {
        await page.locator(`tr[data-job="${id}"][data-status="Failed"]`).waitFor({
          timeout: JOB_MS,
        });
      }

      // Pause: the queue says so, and the overview too.
      await page.getByRole("button", { name: "Pause ingestion" }).click();
      await page.waitForURL(/paused=1/);
      await page.locator('[data-queue-paused="true"]').waitFor();
      await page.getByRole("button", { name: "Resume ingestion" }).waitFor();

      // Search, then the bulk retry of what the search matches: its count first.
      await page.getByLabel("Search").fill("moby");
      await page.getByRole("button", { name: "Filter" }).click();
      await page.waitForURL(/q=moby/);
      assert.equal(await page.locator("tr[data-job]").count(), 1);
      await page.locator(`tr[data-job="${moby}"]`).waitFor();
      await page.screenshot({ path: `${SHOTS}operations-queue-paused.png` });
      await page.getByRole("link", { name: /Retry the Failed jobs matching/ }).click();
      await page.locator('[data-matched="1"]').waitFor();
      await page.screenshot({ path: `${SHOTS}operations-bulk-retry.png` });
      await page.getByRole("button", { name: "Retry 1 jobs" }).click();
      await page.waitForURL(/bulk=1/);
      assert.match(await page.getByRole("status").textContent() ?? "", /1 jobs queued again/);

      // Paused, the retried job stays Queued; its page offers the cancel and shows its attempt.
      await page.goto(`${base}/admin/queues/ingestion/jobs/${moby}`);
      await page.locator('#job [data-status="Queued"]').waitFor();
      assert.equal(await page.locator('[data-outcome="failed"]').count(), 1);
      await page.getByRole("button", { name: `Cancel job #${moby}` }).click();
      await page.waitForURL(/cancelled=1/);
      await page.locator('#job [data-status="Failed"]').waitFor();
      assert.match(await page.locator("#job pre").textContent() ?? "", /cancelled by admin/);
      await page.getByRole("button", { name: `Retry job #${moby}` }).waitFor();
      await page.screenshot({ path: `${SHOTS}operations-job-cancelled.png`, fullPage: true });
      // The other job was not matched: still Failed.
      const other = await fetch(`${base}/internal/ingestion/jobs/${emma}`, {
        headers: { authorization: `Bearer ${TEST_TOKEN}` },
      });
      assert.equal((await other.json()).status, "Failed");

      // Every action is a same-origin post: from another origin it is refused, cookie or not.
      const cookies = await page.context().cookies();
      const cookie = cookies.map((c) => `${c.name}=${c.value}`).join("; ");
      for (
        const path of [
          "/admin/queues/ingestion/resume",
          `/admin/queues/ingestion/jobs/${emma}/cancel`,
          "/admin/queues/ingestion/retry",
        ]
      ) {
        const res = await fetch(`${base}${path}`, {
          method: "POST",
          headers: {
            cookie,
            origin: "http://evil.example",
            "content-type": "application/x-www-form-urlencoded",
          },
          body: "",
          redirect: "manual",
        });
        assert.equal(res.status, 403, path);
        await res.body?.cancel();
      }
      const still = await fetch(`${base}/readyz`).then((r) => r.json());
      assert.deepEqual(still.paused, ["ingestion"], "the refused resume changed nothing");

      await page.goto(`${base}/admin/queues/ingestion`);
      await page.getByRole("button", { name: "Resume ingestion" }).click();
      await page.waitForURL(/resumed=1/);
      await page.locator('[data-queue-paused="false"]').waitFor();
      await waitFor(
        "the overview to show the queue running",
        async () => {
          await page.goto(`${base}/admin`);
          return (await page.locator('[data-queue="ingestion"] [data-paused]').getAttribute(
            "data-paused",
          )) === "false";
        },
        10_000,
        200,
      );
      assert.deepEqual(refused, [], "the CSP blocked part of the dashboard");
    } finally {
      await browser.close();
      worker.child.kill("SIGTERM");
      await worker.exited;
      await Deno.remove(storage, { recursive: true });
      await Deno.remove(data, { recursive: true });
    }
  },
  { requires: ["chromium"] },
);
