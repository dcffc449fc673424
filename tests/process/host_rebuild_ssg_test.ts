/**
 * `host/rebuild-ssg.sh` runs for real (`sh`, curl, jq) against a spawned worker (ADR-022
 * row 4: "rebuild-ssg.sh follows a Queued one or waits out a Running one"). A render is held in
 * flight by a lock on `chapters` from a second session, as tests/process/ssg_process_test.ts does, so the
 * script meets a `Running` job and a `Queued` follow-up without any test hook in the worker.
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/db.ts";
import { dbTest, type TestDb, waitFor, within } from "../_db.ts";
import { spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";
import { freePort } from "../_fs.ts";
import { listening } from "../_host.ts";
import { insertEdition, ssgJob } from "../_ssg.ts";

/** These tests need curl (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["curl"] } as const;

const SCRIPT = new URL("../../host/rebuild-ssg.sh", import.meta.url).pathname;

interface Run {
  child: Deno.ChildProcess;
  /** stderr lines so far (the script's progress log). */
  log: string[];
  /** Wait for a stderr line matching `pattern`. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** The exit code and all of stdout (the final job JSON). */
  exited: Promise<{ code: number; signal: Deno.Signal | null; stdout: string }>;
}

/** Run the script with `sh`, as an operator would, with a clean environment. */
function rebuild(env: Record<string, string>): Run {
  const child = new Deno.Command("sh", {
    args: [SCRIPT],
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", TEXTSTACK_TOKEN: TEST_TOKEN, ...env },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const log: string[] = [];
  const stderr = (async () => {
    let buffered = "";
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      log.push(...lines);
    }
    if (buffered) log.push(buffered);
  })();
  const stdout = new Response(child.stdout).text();
  const exited = Promise.all([child.status, stdout, stderr]).then(([status, out]) => ({
    code: status.code,
    signal: status.signal,
    stdout: out,
  }));
  return {
    child,
    log,
    exited,
    waitForLine: (pattern, timeoutMs = 30_000) =>
      waitFor(
        `a line matching ${pattern} in ${JSON.stringify(log)}`,
        () => log.find((l) => pattern.test(l)),
        timeoutMs,
        20,
      ),
  };
}

/** The exit of `run`, failing the test after 60 s instead of hanging. */
function exitOf(run: Run) {
  return within("rebuild-ssg.sh to exit", run.exited, 60_000);
}

async function startWorker(db: TestDb, root: string): Promise<[WorkerProcess, string]> {
  const worker = spawnWorker(db, {
    STORAGE_DIR: `${root}/storage`,
    SITE_DIR: `${root}/site`,
    SITE_URL: "https://books.example/",
  });
  const url = await listening(worker);
  await worker.waitForLog("consumer started", { queue: "ssg" }, 30_000);
  return [worker, url];
}

async function stopWorker(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  assert.equal((await worker.exited).code, 0);
}

/** Hold every render in flight: its read of the chapters waits on this lock until `release()`. */
async function holdRenders(db: TestDb) {
  const holder = connect(db.url, { schema: db.schema, applicationName: "test-holder", max: 1 });
  const release = Promise.withResolvers<void>();
  const locked = Promise.withResolvers<void>();
  const holding = holder.begin(async (tx) => {
    await tx`lock table chapters in access exclusive mode`;
    locked.resolve();
    await release.promise;
  });
  await Promise.race([locked.promise, holding]);
  return {
    async release() {
      release.resolve();
      await holding.catch(() => {});
      await holder.end({ timeout: 1 });
    },
  };
}

/** Wait until the worker's render of job `id` is blocked on the held lock. */
async function renderBlocked(db: TestDb, id: string): Promise<void> {
  await waitFor(`job ${id} Running`, async () => (await ssgJob(db, id)).status === "Running");
  await waitFor("the render to wait on the lock", async () => {
    const rows = await db.sql`
      select 1 from pg_stat_activity
      where wait_event_type = 'Lock' and query ilike '%chapters%'
        and application_name = 'textstack'`;
    return rows.length > 0;
  }, 15_000);
}

/** The pid of a process's child running `command`, if any (Linux /proc). */
async function childRunning(pid: number, command: string): Promise<number | undefined> {
  const children = await Deno.readTextFile(`/proc/${pid}/task/${pid}/children`).catch(() => "");
  for (const child of children.trim().split(/\s+/).filter(Boolean)) {
    const comm = await Deno.readTextFile(`/proc/${child}/comm`).catch(() => "");
    if (comm.trim() === command) return Number(child);
  }
  return undefined;
}

function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

async function post(url: string): Promise<Response> {
  return await fetch(url, { method: "POST", headers: { authorization: `Bearer ${TEST_TOKEN}` } });
}

dbTest(
  "rebuild-ssg.sh queues a Full rebuild and exits 0 with the Completed job on stdout",
  async (db) => {
    const root = await Deno.makeTempDir({ prefix: "textstack-rebuild-" });
    const [worker, url] = await startWorker(db, root);
    try {
      await insertEdition(db, `${root}/storage`, {
        title: "Rebuilt Book",
        chapters: [{ title: "One", html: "<p>Hello.</p>" }],
      });
      const run = rebuild({ TEXTSTACK_URL: url, REBUILD_POLL_S: "1" });
      const { code, stdout } = await exitOf(run);
      assert.equal(code, 0, run.log.join("\n"));
      const job = JSON.parse(stdout);
      assert.equal(job.status, "Completed");
      assert.match(run.log.join("\n"), new RegExp(`queued Full rebuild ${job.id}\\b`));
      assert.match(run.log.join("\n"), new RegExp(`rebuild ${job.id} completed`));
      assert.deepEqual((await db.sql`select id from ssg_rebuild_jobs`).map((r) => r.id), [job.id]);
      assert.ok((await Deno.readTextFile(`${root}/site/index.html`)).includes("Rebuilt Book"));
    } finally {
      await stopWorker(worker);
    }
  },
  REQUIRES,
);

dbTest(
  "rebuild-ssg.sh waits out a Running rebuild, joins a Queued one, and on SIGTERM stops following without touching the job",
  async (db) => {
    const root = await Deno.makeTempDir({ prefix: "textstack-rebuild-" });
    const [worker, url] = await startWorker(db, root);
    const scratch = await Deno.makeTempDir({ prefix: "textstack-rebuild-tmp-" });
    // A published edition, so a render reads the held chapters; and one to publish mid-render.
    await insertEdition(db, `${root}/storage`, {
      title: "Old Book",
      chapters: [{ title: "One", html: "<p>Hi.</p>" }],
    });
    const edition = await insertEdition(db, `${root}/storage`, {
      title: "Late Book",
      chapters: [{ title: "One", html: "<p>Hello.</p>" }],
      published: false,
    });
    const hold = await holdRenders(db);
    let held = true;
    try {
      const first = await (await post(`${url}/internal/ssg/rebuild-all`)).json();
      await renderBlocked(db, first.id);

      // A Running job only: the script waits it out (no new job).
      const waiter = rebuild({ TEXTSTACK_URL: url, REBUILD_POLL_S: "1" });
      await waiter.waitForLine(new RegExp(`following Full rebuild ${first.id}, already Running`));
      // A publish during the render queues a follow-up: the next script joins that one, since it
      // will read the new edition and the Running one may not.
      const published = await (await post(`${url}/internal/editions/${edition}/publish`)).json();
      const followUp = published.rebuild.id;
      assert.notEqual(followUp, first.id);
      const joiner = rebuild({ TEXTSTACK_URL: url, REBUILD_POLL_S: "1" });
      await joiner.waitForLine(new RegExp(`following Full rebuild ${followUp}, already Queued`));

      // REBUILD_TIMEOUT_S passes first: exit 3, the job untouched.
      const impatient = rebuild({
        TEXTSTACK_URL: url,
        REBUILD_POLL_S: "1",
        REBUILD_TIMEOUT_S: "1",
      });
      const late = await exitOf(impatient);
      assert.equal(late.code, 3, impatient.log.join("\n"));
      assert.match(impatient.log.join("\n"), /still Queued after 1s; giving up following it/);

      // SIGTERM while it sleeps between looks (a long REBUILD_POLL_S): it exits at once with 143,
      // leaves no temp files, and the rebuild it followed goes on.
      const stopped = rebuild({ TEXTSTACK_URL: url, REBUILD_POLL_S: "30", TMPDIR: scratch });
      await stopped.waitForLine(new RegExp(`following Full rebuild ${followUp}, already Queued`));
      assert.equal((await Array.fromAsync(Deno.readDir(scratch))).length, 1, "its temp dir");
      const sleeper = await waitFor(
        "the script to sleep between looks",
        () => childRunning(stopped.child.pid, "sleep"),
      );
      const t0 = performance.now();
      stopped.child.kill("SIGTERM");
      const term = await exitOf(stopped);
      const took = performance.now() - t0;
      assert.equal(term.code, 143, stopped.log.join("\n"));
      assert.ok(took < 2000, `SIGTERM took ${Math.round(took)} ms to stop the script`);
      assert.equal(term.stdout, "");
      await waitFor("its sleep to be stopped with it", () => !alive(sleeper), 2000);
      assert.deepEqual(await Array.fromAsync(Deno.readDir(scratch)), [], "temp dir removed");
      assert.equal((await ssgJob(db, first.id)).status, "Running");
      assert.equal((await ssgJob(db, followUp)).status, "Queued");

      await hold.release();
      held = false;
      const waited = await exitOf(waiter);
      assert.equal(waited.code, 0, waiter.log.join("\n"));
      assert.deepEqual(
        [JSON.parse(waited.stdout).id, JSON.parse(waited.stdout).status],
        [first.id, "Completed"],
      );
      const joined = await exitOf(joiner);
      assert.equal(joined.code, 0, joiner.log.join("\n"));
      assert.deepEqual(
        [JSON.parse(joined.stdout).id, JSON.parse(joined.stdout).status],
        [followUp, "Completed"],
      );
      // No script created a job of its own: the two in flight were followed.
      assert.equal((await db.sql`select id from ssg_rebuild_jobs`).length, 2);
      assert.ok((await Deno.readTextFile(`${root}/site/index.html`)).includes("Late Book"));
    } finally {
      if (held) await hold.release();
      await stopWorker(worker);
    }
  },
  REQUIRES,
);

dbTest(
  "rebuild-ssg.sh exits 1 printing the error of a Failed rebuild, 2 on a refused token, 4 when the worker is down",
  async (db) => {
    const root = await Deno.makeTempDir({ prefix: "textstack-rebuild-" });
    const [worker, url] = await startWorker(db, root);
    try {
      // SITE_DIR must be a symlink to a build: a plain directory there makes every render fail.
      await Deno.mkdir(`${root}/site`, { recursive: true });
      const failing = rebuild({ TEXTSTACK_URL: url, REBUILD_POLL_S: "1" });
      const failed = await exitOf(failing);
      assert.equal(failed.code, 1, failing.log.join("\n"));
      const job = JSON.parse(failed.stdout);
      assert.equal(job.status, "Failed");
      assert.match(job.error, /^Cannot rebuild the site: /);
      assert.ok(
        failing.log.some((l) => l.includes(`rebuild ${job.id} failed: ${job.error}`)),
        failing.log.join("\n"),
      );

      const refused = rebuild({ TEXTSTACK_URL: url, TEXTSTACK_TOKEN: "wrong-token-0123456789" });
      const denied = await exitOf(refused);
      assert.equal(denied.code, 2, refused.log.join("\n"));
      assert.match(refused.log.join("\n"), /refused TEXTSTACK_TOKEN \(HTTP 401\)/);
      assert.equal((await db.sql`select id from ssg_rebuild_jobs`).length, 1, "nothing queued");
    } finally {
      await stopWorker(worker);
    }
    const down = rebuild({ TEXTSTACK_URL: `http://127.0.0.1:${freePort()}` });
    const unreachable = await exitOf(down);
    assert.equal(unreachable.code, 4, down.log.join("\n"));
    assert.match(down.log.join("\n"), /worker unreachable/);

    const bad = rebuild({ TEXTSTACK_URL: "http://127.0.0.1:1", REBUILD_POLL_S: "0" });
    assert.equal((await exitOf(bad)).code, 2);
    assert.match(bad.log.join("\n"), /must be positive integers/);
  },
  REQUIRES,
);
