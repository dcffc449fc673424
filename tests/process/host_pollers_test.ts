/**
 * The host pollers run for real (POSIX sh + curl + jq) against a spawned worker, with real
 * signals.
 */
import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { collectJsonLines, spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";
import { freePort } from "../_fs.ts";
import { insertEdition, listening } from "../_host.ts";

/** These tests need curl, jq (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["curl", "jq"] } as const;

const HOST_DIR = new URL("../../host/", import.meta.url).pathname;

interface Script {
  child: Deno.ChildProcess;
  lines: Array<Record<string, unknown>>;
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<Deno.CommandStatus>;
}

/** Run a host script with `sh`, as systemd would, collecting its stderr lines. */
function runScript(name: string, env: Record<string, string>): Script {
  const child = new Deno.Command("sh", {
    args: [`${HOST_DIR}${name}`],
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", TEXTSTACK_TOKEN: TEST_TOKEN, ...env },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: Array<Record<string, unknown>> = [];
  const pumps = Promise.all([
    collectJsonLines(child.stdout, lines, () => {}, "stdout: "),
    collectJsonLines(child.stderr, lines),
  ]);
  const exited = Promise.all([child.status, pumps]).then(([status]) => status);
  return {
    child,
    lines,
    exited,
    waitForLine: (pattern, timeoutMs = 30_000) =>
      waitFor(
        `a line matching ${pattern} in ${JSON.stringify(lines)}`,
        () => lines.map((l) => String(l.msg)).find((l) => pattern.test(l)),
        timeoutMs,
        20,
      ),
  };
}

async function startWorker(
  db: TestDb,
  env: Record<string, string> = {},
): Promise<[WorkerProcess, string]> {
  const worker = spawnWorker(db, env);
  return [worker, await listening(worker)];
}

async function stopWorker(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  assert.equal((await worker.exited).code, 0);
}

async function row(db: TestDb, table: string, id: string) {
  const [r] = await db.sql`select * from ${db.sql(table)} where id = ${id}`;
  return r;
}

async function queueAutoPublish(db: TestDb, edition: string): Promise<string> {
  const [r] = await db.sql<{ id: string }[]>`
    insert into auto_publish_jobs (edition_id) values (${edition}) returning id`;
  return r.id;
}

dbTest(
  "seo-publish-poll.sh on SIGTERM stops its command, gives the job back (attempt not counted), exits 0",
  async (db) => {
    const [worker, url] = await startWorker(db);
    const dir = await Deno.makeTempDir({ prefix: "textstack-poll-" });
    try {
      const id = await queueAutoPublish(db, await insertEdition(db.sql));
      const poller = runScript("seo-publish-poll.sh", {
        TEXTSTACK_URL: url,
        POLL_INTERVAL_S: "1",
        PUBLISH_COMMAND: `cat > ${dir}/job.json; echo $$ > ${dir}/pid; exec sleep 60`,
      });
      await poller.waitForLine(new RegExp(`job ${id} claimed`));
      await waitFor(
        "the command to start",
        async () => (await Deno.readTextFile(`${dir}/pid`).catch(() => "")) !== "",
      );
      const job = JSON.parse(await Deno.readTextFile(`${dir}/job.json`));
      assert.equal(job.id, id);
      assert.equal(job.claim_token, undefined, "the token is not handed to the command");
      assert.equal((await row(db, "auto_publish_jobs", id)).status, "Running");
      const t0 = performance.now();
      poller.child.kill("SIGTERM");
      const status = await poller.exited;
      const took = performance.now() - t0;
      assert.equal(status.code, 0);
      assert.ok(took < 3000, `exit took ${took} ms`);
      const r = await row(db, "auto_publish_jobs", id);
      assert.deepEqual([r.status, r.attempt_count, r.error], ["Queued", 0, null]);
      await poller.waitForLine(new RegExp(`job ${id} given back`), 1000);
      // The command (sleep 60) was stopped with the script.
      const pid = Number((await Deno.readTextFile(`${dir}/pid`)).trim());
      await waitFor("the command to end", () => {
        try {
          Deno.kill(pid, "SIGCONT");
          return false;
        } catch {
          return true;
        }
      });
    } finally {
      await stopWorker(worker);
    }
  },
  REQUIRES,
);

dbTest(
  "seo-publish-poll.sh SIGKILLed and restarted: its stranded job is Failed interrupted; the next one completes",
  async (db) => {
    const [worker, url] = await startWorker(db);
    const dir = await Deno.makeTempDir({ prefix: "textstack-poll-" });
    try {
      const edition = await insertEdition(db.sql);
      const id = await queueAutoPublish(db, edition);
      const first = runScript("seo-publish-poll.sh", {
        TEXTSTACK_URL: url,
        POLL_INTERVAL_S: "1",
        PUBLISH_COMMAND: `echo $$ > ${dir}/pid; exec sleep 60`,
      });
      await first.waitForLine(new RegExp(`job ${id} claimed`));
      await waitFor(
        "the command to start",
        async () => (await Deno.readTextFile(`${dir}/pid`).catch(() => "")) !== "",
      );
      first.child.kill("SIGKILL");
      await first.exited;
      // SIGKILL reaches only the script; end its orphaned command ourselves.
      Deno.kill(Number((await Deno.readTextFile(`${dir}/pid`)).trim()), "SIGKILL");
      assert.equal((await row(db, "auto_publish_jobs", id)).status, "Running");

      const second = runScript("seo-publish-poll.sh", {
        TEXTSTACK_URL: url,
        POLL_INTERVAL_S: "1",
        PUBLISH_COMMAND: "cat > /dev/null; echo published on the host",
      });
      await second.waitForLine(new RegExp(`recovered: \\["${id}"\\]`));
      const stranded = await row(db, "auto_publish_jobs", id);
      assert.deepEqual([stranded.status, stranded.error], [
        "Failed",
        "interrupted (consumer restarted)",
      ]);
      // The edition is free again: a new job is created, claimed and completed.
      const next = await (await fetch(`${url}/internal/auto-publish/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ edition_id: edition }),
      })).json();
      await second.waitForLine(new RegExp(`job ${next.id}: complete accepted`));
      const done = await row(db, "auto_publish_jobs", next.id);
      assert.equal(done.status, "Completed");
      assert.equal(done.result.output, "published on the host");
      assert.ok((await row(db, "editions", edition)).published_at);
      second.child.kill("SIGTERM");
      assert.equal((await second.exited).code, 0);
    } finally {
      await stopWorker(worker);
    }
  },
  REQUIRES,
);

dbTest("seo-publish-poll.sh reports a failing command as fail with its stderr tail", async (db) => {
  const [worker, url] = await startWorker(db);
  try {
    const id = await queueAutoPublish(db, await insertEdition(db.sql));
    const poller = runScript("seo-publish-poll.sh", {
      TEXTSTACK_URL: url,
      POLL_INTERVAL_S: "1",
      PUBLISH_COMMAND: "echo 'rsync: connection refused' >&2; exit 3",
    });
    await poller.waitForLine(new RegExp(`job ${id}: fail accepted`));
    const r = await row(db, "auto_publish_jobs", id);
    assert.deepEqual([r.status, r.error], [
      "Failed",
      "PUBLISH_COMMAND exited 3: rsync: connection refused",
    ]);
    poller.child.kill("SIGTERM");
    assert.equal((await poller.exited).code, 0);
  } finally {
    await stopWorker(worker);
  }
}, REQUIRES);

dbTest(
  "seo-backfill-poll.sh with the default SEO_COMMAND applies fields derived from each edition",
  async (db) => {
    const [worker, url] = await startWorker(db);
    try {
      const a = await insertEdition(db.sql, "Moby Dick", "Herman Melville");
      const b = await insertEdition(db.sql, "Untold", null);
      for (const e of [a, b]) {
        await db.sql`insert into seo_backfill_jobs (edition_id) values (${e})`;
      }
      const poller = runScript("seo-backfill-poll.sh", {
        TEXTSTACK_URL: url,
        POLL_INTERVAL_S: "1",
      });
      await poller.waitForLine(/job \d+: complete accepted[\s\S]*/);
      await waitFor(`both jobs Completed: ${JSON.stringify(poller.lines)}`, async () => {
        const rows = await db.sql`select status from seo_backfill_jobs where status = 'Completed'`;
        return rows.length === 2;
      }, 20_000);
      const [ea] = await db
        .sql`select meta_title, meta_description, meta_keywords from editions where id = ${a}`;
      assert.equal(ea.meta_title, "Moby Dick by Herman Melville");
      assert.equal(ea.meta_description, "It was a bright cold day.");
      assert.ok(ea.meta_keywords.includes("Herman Melville"));
      const [eb] = await db.sql`select meta_title from editions where id = ${b}`;
      assert.equal(eb.meta_title, "Untold");
      poller.child.kill("SIGTERM");
      assert.equal((await poller.exited).code, 0);
    } finally {
      await stopWorker(worker);
    }
  },
  REQUIRES,
);

dbTest(
  "seo-backfill-poll.sh on SIGTERM mid-batch gives back every unsettled job of its batch and exits 0",
  async (db) => {
    const [worker, url] = await startWorker(db);
    const dir = await Deno.makeTempDir({ prefix: "textstack-poll-" });
    try {
      for (let i = 0; i < 3; i++) {
        const e = await insertEdition(db.sql, `Book ${i}`);
        await db.sql`insert into seo_backfill_jobs (edition_id) values (${e})`;
      }
      const poller = runScript("seo-backfill-poll.sh", {
        TEXTSTACK_URL: url,
        POLL_INTERVAL_S: "1",
        SEO_BATCH: "3",
        SEO_COMMAND: `touch ${dir}/started; exec sleep 60`,
      });
      await poller.waitForLine(/claimed 3 job\(s\)/);
      await waitFor(
        "the command to start",
        () => Deno.stat(`${dir}/started`).then(() => true, () => false),
      );
      poller.child.kill("SIGTERM");
      assert.equal((await poller.exited).code, 0);
      const rows = await db.sql`select status, attempt_count from seo_backfill_jobs order by id`;
      assert.deepEqual(rows.map((r) => [r.status, r.attempt_count]), [
        ["Queued", 0],
        ["Queued", 0],
        ["Queued", 0],
      ]);
    } finally {
      await stopWorker(worker);
    }
  },
  REQUIRES,
);

dbTest(
  "the pollers back off (capped) while the worker is down, never spin, and stop on SIGTERM",
  async () => {
    const port = freePort();
    const poller = runScript("seo-publish-poll.sh", {
      TEXTSTACK_URL: `http://127.0.0.1:${port}`,
      BACKOFF_MAX_S: "2",
      CURL_MAX_TIME_S: "2",
    });
    await poller.waitForLine(/retrying in 2s/);
    await poller.waitForLine(/retrying in 2s[\s\S]*/);
    const t0 = performance.now();
    await waitFor(
      "two more retries",
      () => poller.lines.filter((l) => /retrying in/.test(String(l.msg))).length >= 4,
      10_000,
    );
    const elapsed = performance.now() - t0;
    const delays = poller.lines.map((l) => /retrying in (\d+)s/.exec(String(l.msg))?.[1]).filter(
      Boolean,
    );
    assert.deepEqual(delays.slice(0, 4), ["1", "2", "2", "2"]);
    assert.ok(elapsed >= 1500, `retries came ${elapsed} ms apart: spinning`);
    poller.child.kill("SIGTERM");
    assert.equal((await poller.exited).code, 0);

    const bad = runScript("seo-backfill-poll.sh", {
      TEXTSTACK_URL: "http://127.0.0.1:1",
      POLL_INTERVAL_S: "0",
    });
    assert.equal((await bad.exited).code, 2);
    assert.ok(bad.lines.some((l) => /Cannot parse POLL_INTERVAL_S/.test(String(l.msg))));
    return Promise.resolve();
  },
  REQUIRES,
);

Deno.test("the systemd units pass systemd-analyze verify and stop the way the pollers need", async () => {
  for (
    const name of ["textstack-seo-publish-poll.service", "textstack-seo-backfill-poll.service"]
  ) {
    const unit = await Deno.readTextFile(`${HOST_DIR}${name}`);
    for (const line of ["KillMode=mixed", "Restart=on-failure", "KillSignal=SIGTERM"]) {
      assert.ok(unit.includes(`\n${line}\n`), `${name}: ${line}`);
    }
    const stop = Number(/\nTimeoutStopSec=(\d+)\n/.exec(unit)?.[1]);
    const common = await Deno.readTextFile(`${HOST_DIR}poll-common.sh`);
    const budget = Number(/\nSTOP_TIMEOUT_S=\$\{STOP_TIMEOUT_S:-(\d+)\}\n/.exec(common)?.[1]);
    assert.ok(budget > 0, "poll-common.sh sets a default STOP_TIMEOUT_S");
    assert.ok(
      stop >= budget + 3,
      `${name}: TimeoutStopSec (${stop}) above the poller's whole stop, STOP_TIMEOUT_S (${budget})`,
    );
    assert.match(unit, /docs\/host-pollers\.md/, `${name}: points to the stop's documentation`);
    assert.match(unit, /\nEnvironmentFile=\/etc\/textstack\/host-pollers\.env\n/);
    const which = await new Deno.Command("sh", {
      args: ["-c", "command -v systemd-analyze"],
      stdout: "null",
    })
      .output();
    if (!which.success) continue; // verified where systemd-analyze exists
    const dir = await Deno.makeTempDir();
    await Deno.writeTextFile(`${dir}/${name}`, unit.replaceAll("/opt/textstack/host/", HOST_DIR));
    const out = await new Deno.Command("systemd-analyze", { args: ["verify", `${dir}/${name}`] })
      .output();
    const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    assert.ok(out.success, text);
    assert.equal(text.trim(), "", text);
  }
});
