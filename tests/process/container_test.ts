/**
 * The Docker image, built and run for real with the machine's engine: `textstack-worker:local`
 * (`deno task image`), rebuilt here from the current sources (a cached build takes seconds), then
 * started as a user runs it — read-only root filesystem, `/data` a named volume, `/tmp` a tmpfs,
 * host networking, against the test server (`DATABASE_URL`, its own schema) or with the embedded
 * default inside the container.
 *
 * Needs Debian's docker.io (a running engine) and the image: without them every test here is
 * skipped, saying so; under CI=true they fail instead. `DOCKER` names the client (default
 * `docker`).
 *
 * Prints the image's size and the cached build time, the time from `docker run` to ready and
 * the `docker stop` time with a job in flight.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createTestDb, type TestDb, testUrl, waitFor, within } from "../_db.ts";
import { freePort } from "../_fs.ts";
import { insertJob, jobRow, SMALL_BOOK } from "../_ingestion.ts";
import { collectJsonLines, TEST_TOKEN } from "../_worker.ts";
import { dockerClient, imageSize } from "../../tools/image.ts";
import { IN_CI } from "../_requires.ts";
import { productionGraph } from "../../tools/production_imports.ts";

const DOCKER = dockerClient();
const IMAGE = "textstack-worker:local";
const ROOT = new URL("../../", import.meta.url).pathname;
const MAX_IMAGE_BYTES = 300e6;
const READY_WITHIN_MS = 5000;
const SHUTDOWN_BUDGET_MS = 3000;

/** Run the Docker client to completion; its exit code and output. */
/**
 * Run the Docker client to completion, killed after `timeoutMs` (a `docker exec` writing a FIFO
 * nobody reads would otherwise block for good); its exit code and output.
 */
async function docker(
  args: string[],
  stdin?: string,
  timeoutMs = 60_000,
): Promise<{ code: number; out: string; err: string }> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(DOCKER, {
      args,
      stdin: stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    return { code: 127, out: "", err: err instanceof Error ? err.message : String(err) };
  }
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  try {
    if (stdin !== undefined) {
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(stdin));
      await writer.close();
    }
    const out = await child.output();
    const text = new TextDecoder();
    const err = out.signal === "SIGKILL" ? `docker ${args[0]}: killed after ${timeoutMs} ms` : "";
    return {
      code: out.code,
      out: text.decode(out.stdout).trim(),
      err: err + text.decode(out.stderr),
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Why the container tests cannot run here, or `undefined` when they can. */
async function unavailable(): Promise<string | undefined> {
  const engine = await docker(["version", "--format", "{{.Server.Version}}"]);
  if (engine.code !== 0) {
    return `no Docker engine answers (${engine.err.trim().split("\n")[0]}): ` +
      "install Debian's docker.io (apt-get install docker.io debootstrap), start dockerd, " +
      "then `deno task image`";
  }
  if ((await docker(["image", "inspect", IMAGE])).code !== 0) {
    return `no image ${IMAGE}: build it with \`deno task image\``;
  }
  return undefined;
}

const missing = await unavailable();
if (missing) {
  console.log(`container tests ${IN_CI ? "FAIL (CI=true)" : "skipped"}: ${missing}`);
}

/**
 * A container test: without an engine and the image ignored, its name saying what to install
 * (as tests/_requires.ts does for a missing package); under CI=true it fails instead.
 */
function containerTest(name: string, fn: () => Promise<void>): void {
  const skip = missing !== undefined && !IN_CI;
  Deno.test({
    name: skip ? `${name} [skipped: ${missing}]` : name,
    ignore: skip,
    // The docker client's pipes and timers outlive a failed assertion's cleanup by a moment.
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      if (missing) throw new Error(missing);
      await fn();
    },
  });
}

/** A started container, its JSON log lines collected as they come. */
interface Container {
  name: string;
  port: number;
  logs: Array<Record<string, unknown>>;
  waitForLog(msg: string, match?: Record<string, unknown>, timeoutMs?: number): Promise<unknown>;
  /** ms from `docker run` to the first 200 from /readyz. */
  ready(timeoutMs?: number): Promise<number>;
  /** The attached client's exit (the container's exit code). */
  exited: Promise<Deno.CommandStatus>;
}

const cleanups: Array<() => Promise<unknown>> = [];

async function cleanUp(): Promise<void> {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
}

async function volume(): Promise<string> {
  const name = `textstack-test-${crypto.randomUUID().slice(0, 8)}`;
  assert.equal((await docker(["volume", "create", name])).code, 0);
  cleanups.push(() => docker(["volume", "rm", "-f", name]));
  return name;
}

/** Run a one-off command in the image with the volume mounted at /data (as uid 1000). */
async function inVolume(vol: string, script: string, stdin?: string): Promise<void> {
  const args = ["run", "--rm", "-i", "--network", "none", "-v", `${vol}:/data`];
  const out = await docker([...args, "--entrypoint", "sh", IMAGE, "-c", script], stdin);
  assert.equal(out.code, 0, out.err);
}

/**
 * `docker run` the image as a user runs it: read-only root, `/data` the volume, `/tmp` a tmpfs,
 * host networking on a free port of 127.0.0.1, a 1 s health interval.
 */
function start(vol: string, env: Record<string, string>): Container {
  const name = `textstack-test-${crypto.randomUUID().slice(0, 8)}`;
  const port = freePort();
  const vars = {
    HOST: "127.0.0.1",
    PORT: String(port),
    INTERNAL_API_TOKEN: TEST_TOKEN,
    POLL_INTERVAL_MS: "30000",
    SHUTDOWN_BUDGET_MS: String(SHUTDOWN_BUDGET_MS),
    LOG_LEVEL: "info",
    ...env,
  };
  const args = [
    "run",
    "--name",
    name,
    "--network",
    "host",
    "--read-only",
    "--tmpfs",
    "/tmp",
    "-v",
    `${vol}:/data`,
    "--health-interval",
    "1s",
    ...Object.entries(vars).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
    IMAGE,
  ];
  const started = performance.now();
  const child = new Deno.Command(DOCKER, { args, stdin: "null", stdout: "piped", stderr: "piped" })
    .spawn();
  cleanups.push(() => docker(["rm", "-f", name]));
  const logs: Array<Record<string, unknown>> = [];
  const pumps = Promise.all([
    collectJsonLines(child.stdout, logs),
    collectJsonLines(child.stderr, logs, () => {}, "stderr: "),
  ]);
  const exited = Promise.all([child.status, pumps]).then(([status]) => status);
  return {
    name,
    port,
    logs,
    exited,
    waitForLog: (msg, match = {}, timeoutMs = 15_000) =>
      waitFor(
        `log "${msg}" ${JSON.stringify(match)} from ${name}`,
        () =>
          logs.find((l) => l.msg === msg && Object.entries(match).every(([k, v]) => l[k] === v)),
        timeoutMs,
        20,
      ).catch((err) => {
        throw new Error(`${err.message}; logs: ${JSON.stringify(logs)}`);
      }),
    async ready(timeoutMs = READY_WITHIN_MS * 4) {
      await waitFor(
        `/readyz 200 from ${name}`,
        async () => {
          try {
            const res = await fetch(`http://127.0.0.1:${port}/readyz`);
            await res.body?.cancel();
            return res.status === 200;
          } catch {
            return false;
          }
        },
        timeoutMs,
        20,
      ).catch((err) => {
        throw new Error(`${err.message}; logs: ${JSON.stringify(logs)}`);
      });
      return performance.now() - started;
    },
  };
}

/**
 * The uid of the worker and of its PostgreSQL server's processes, read from /proc inside the
 * container. Other processes are left out: a `docker exec` (this one, the HEALTHCHECK's) is
 * briefly root while the runtime sets it up.
 */
async function processUids(name: string): Promise<Array<{ uid: number; cmd: string }>> {
  const script = `
    const out = [];
    for (const e of Deno.readDirSync("/proc")) {
      if (!/^\\d+$/.test(e.name)) continue;
      try {
        const status = Deno.readTextFileSync("/proc/" + e.name + "/status");
        const cmd = Deno.readTextFileSync("/proc/" + e.name + "/cmdline").replaceAll("\\0", " ");
        if (!/main\\.ts|postgres/.test(cmd)) continue;
        out.push({ uid: Number(status.match(/^Uid:\\s+(\\d+)/m)[1]), cmd: cmd.trim() });
      } catch { /* gone */ }
    }
    console.log(JSON.stringify(out));`;
  const out = await docker(["exec", name, "deno", "eval", script]);
  assert.equal(out.code, 0, out.err);
  return JSON.parse(out.out);
}

function api(container: Container, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`http://127.0.0.1:${container.port}${path}`, {
    ...init,
    headers: {
      authorization: `Bearer ${TEST_TOKEN}`,
      "content-type": "application/json",
      ...init.headers,
    },
  });
}

/** Stderr lines that show a dependency fetched at start (the image must start offline). */
function downloads(container: Container): unknown[] {
  return container.logs.filter((l) => /^stderr: .*Download\s/.test(String(l.msg)));
}

async function withDb(fn: (db: TestDb) => Promise<void>): Promise<void> {
  const db = await createTestDb("container");
  try {
    await fn(db);
  } finally {
    await cleanUp();
    await db.close();
  }
}

containerTest(
  "deno task image rebuilds the image from these sources (cached steps reused)",
  async () => {
    const t0 = performance.now();
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-read",
        "--allow-write",
        "--allow-run",
        "--allow-env",
        "tools/image.ts",
      ],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder();
    assert.ok(out.success, `${text.decode(out.stdout).slice(-3000)}${text.decode(out.stderr)}`);
    const size = await imageSize(DOCKER, IMAGE);
    console.log(
      `image ${IMAGE}: ${(size / 1e6).toFixed(0)} MB; rebuilt (cached) in ` +
        `${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    assert.ok(size <= MAX_IMAGE_BYTES, `${size} bytes > ${MAX_IMAGE_BYTES}`);
  },
);

containerTest(
  "the image holds no npm, no Node and no test-only package; uid 1000 owns only /data",
  async () => {
    // The imports no production module loads, as node_modules/.deno names their folders.
    const { unused } = await productionGraph(ROOT.replace(/\/$/, ""));
    const testOnly = unused.map((name) => name.replace(/\/$/, "").replace("/", "\\+"));
    assert.ok(testOnly.includes("playwright-core"), `test-only: ${testOnly}`);
    const script = [
      "for tool in node nodejs npm npx; do command -v $tool && exit 11; done",
      `ls /app/node_modules/.deno | grep -E '^(${testOnly.join("|")})@' && exit 12`,
      "test -d /app/node_modules/.deno || exit 13",
      "test -w /app && exit 14",
      "find /app ! -readable -print | head -5 | grep . && exit 16",
      "find /app -perm -o=w ! -type l -print | head -5 | grep . && exit 17",
      "find / -xdev \\( -user 1000 -o -group 1000 \\) -print | grep -v '^/data' && exit 15",
      "id -u",
    ].join("; ");
    const out = await docker([
      "run",
      "--rm",
      "--network",
      "none",
      "--entrypoint",
      "sh",
      IMAGE,
      "-c",
      script,
    ]);
    assert.equal(out.code, 0, `exit ${out.code}: ${out.out} ${out.err}`);
    assert.equal(out.out.split("\n").at(-1), "1000");
  },
);

containerTest(
  "the container is ready within 5 s read-only, offline-started, turns healthy, not as root",
  () =>
    withDb(async (db) => {
      const vol = await volume();
      const c = start(vol, { DATABASE_URL: testUrl(), DATABASE_SCHEMA: db.schema });
      const readyMs = await c.ready();
      console.log(`docker run → /readyz 200: ${readyMs.toFixed(0)} ms`);
      assert.ok(readyMs < READY_WITHIN_MS, `ready after ${readyMs} ms`);
      await waitFor(
        "healthy",
        async () => {
          const out = await docker(["inspect", "--format", "{{.State.Health.Status}}", c.name]);
          return out.out === "healthy";
        },
        20_000,
        200,
      );
      const inspect = await docker([
        "inspect",
        "--format",
        "{{.HostConfig.ReadonlyRootfs}}",
        c.name,
      ]);
      assert.equal(inspect.out, "true");
      const uids = await processUids(c.name);
      const pid1 = uids.find((p) => p.cmd.includes("main.ts"));
      assert.ok(pid1, JSON.stringify(uids));
      assert.ok(
        uids.every((p) => p.uid === 1000),
        `every process uid 1000: ${JSON.stringify(uids)}`,
      );
      const write = await docker(["exec", c.name, "sh", "-c", "touch /app/x || touch /x"]);
      assert.notEqual(write.code, 0, "the root filesystem is writable");
      assert.deepEqual(downloads(c), [], "nothing fetched at start");
      assert.deepEqual(
        c.logs.filter((l) => /NotCapable|Requires .* access/.test(JSON.stringify(l))),
        [],
      );
    }),
);

/** A Markdown book: Markdown always goes to the extraction child process (books/extract.ts). */
const MARKDOWN_BOOK = [
  "# Two Fables",
  "",
  "## The Fox and the Grapes",
  "",
  "A hungry fox saw some fine bunches of grapes hanging from a vine.",
  "",
  "## The Crow and the Pitcher",
  "",
  "A crow, half-dead with thirst, came upon a pitcher which had once been full of water.",
  "",
].join("\n");

/** The part of a job's body read here (GET /internal/ingestion/jobs/:id). */
interface JobBody {
  status: string;
  edition: { title: string; author: string | null; chapter_count: number };
}

/** Enqueue `sourcePath` through the API and wait for its job to complete; the job's body. */
async function ingest(c: Container, sourcePath: string): Promise<JobBody> {
  const res = await api(c, "/internal/ingestion/jobs", {
    method: "POST",
    body: JSON.stringify({ source_path: sourcePath }),
  });
  assert.equal(res.status, 201);
  const { id } = await res.json();
  return await waitFor(
    `the job for ${sourcePath} completed`,
    async () => {
      const body: JobBody = await (await api(c, `/internal/ingestion/jobs/${id}`)).json();
      assert.notEqual(body.status, "Failed", JSON.stringify(body));
      return body.status === "Completed" ? body : undefined;
    },
    20_000,
    100,
  );
}

containerTest(
  "the container ingests the README's sample book (samples/aesop.txt) and a Markdown book (in the extraction child) to Completed",
  () =>
    withDb(async (db) => {
      const vol = await volume();
      const aesop = await Deno.readTextFile(`${ROOT}samples/aesop.txt`);
      await inVolume(vol, "cat > /data/storage/aesop.txt", aesop);
      await inVolume(vol, "cat > /data/storage/fables.md", MARKDOWN_BOOK);
      const c = start(vol, { DATABASE_URL: testUrl(), DATABASE_SCHEMA: db.schema });
      await c.ready();
      const job = await ingest(c, "aesop.txt");
      assert.equal(job.edition.title, "Three Fables of Aesop");
      assert.equal(job.edition.author, "Aesop");
      assert.equal(job.edition.chapter_count, 3);
      const markdown = await ingest(c, "fables.md");
      assert.equal(markdown.edition.title, "Two Fables");
      assert.equal(markdown.edition.chapter_count, 2);
      assert.deepEqual(
        c.logs.filter((l) => /NotCapable|Requires .* access/.test(JSON.stringify(l))),
        [],
      );
    }),
);

containerTest(
  "docker stop with a job in flight exits 0 within SHUTDOWN_BUDGET_MS, the job Queued at attempt 0",
  () =>
    withDb(async (db) => {
      const vol = await volume();
      // A FIFO nobody writes to keeps the run open until it is aborted (tests/process/process_test.ts).
      await inVolume(vol, "mkfifo /data/storage/stream.txt");
      const c = start(vol, { DATABASE_URL: testUrl(), DATABASE_SCHEMA: db.schema });
      await c.ready();
      await c.waitForLog("consumer started", { queue: "ingestion" });
      const id = await insertJob(db, "stream.txt");
      await c.waitForLog("job claimed", { id });
      assert.equal((await jobRow(db, id)).status, "Processing");
      const t0 = performance.now();
      const stop = await docker(["stop", c.name]);
      const stopMs = performance.now() - t0;
      assert.equal(stop.code, 0, stop.err);
      console.log(`docker stop with a job in flight: ${stopMs.toFixed(0)} ms`);
      assert.ok(stopMs < SHUTDOWN_BUDGET_MS, `docker stop took ${stopMs} ms`);
      assert.equal((await within("the container's exit", c.exited)).code, 0);
      const code = await docker(["inspect", "--format", "{{.State.ExitCode}}", c.name]);
      assert.equal(code.out, "0");
      const row = await jobRow(db, id);
      assert.deepEqual([row.status, row.attempt_count, row.claimed_by], ["Queued", 0, null]);
      await c.waitForLog("job given back", { id });
    }),
);

containerTest(
  "after docker kill mid-job, a new container recovers the job and completes it",
  () =>
    withDb(async (db) => {
      const vol = await volume();
      await inVolume(vol, "mkfifo /data/storage/stream.txt");
      const env = { DATABASE_URL: testUrl(), DATABASE_SCHEMA: db.schema };
      const first = start(vol, env);
      await first.ready();
      await first.waitForLog("consumer started", { queue: "ingestion" });
      const id = await insertJob(db, "stream.txt");
      await first.waitForLog("job claimed", { id });
      assert.equal((await docker(["kill", first.name])).code, 0);
      assert.equal((await within("the killed container's exit", first.exited)).code, 137);

      const second = start(vol, env);
      await second.ready();
      await second.waitForLog("orphan recovered (its consumer is gone)", { id });
      await second.waitForLog("job claimed", { id, attempt: 2 });
      // The re-picked run gets its file: a writer on the FIFO unblocks the reader.
      const write = await docker(
        ["exec", "-i", second.name, "sh", "-c", "cat > /data/storage/stream.txt"],
        SMALL_BOOK,
      );
      assert.equal(write.code, 0, write.err);
      await waitFor(
        "completion",
        async () => (await jobRow(db, id)).status === "Completed",
        20_000,
      );
      assert.equal((await jobRow(db, id)).attempt_count, 2);
    }),
);

containerTest(
  "without DATABASE_URL the embedded PostgreSQL starts inside the container as uid 1000",
  async () => {
    try {
      const vol = await volume();
      // Not the default port: with host networking the server listens on the host's 127.0.0.1.
      const c = start(vol, { EMBEDDED_PG_PORT: String(freePort()) });
      await c.ready(60_000);
      await c.waitForLog("DATABASE_URL unset: starting embedded PostgreSQL", { dir: "/data/pg" });
      const uids = await processUids(c.name);
      const servers = uids.filter((p) => /postgres/.test(p.cmd));
      assert.ok(servers.length > 0, JSON.stringify(uids));
      assert.deepEqual(uids.filter((p) => p.uid !== 1000), [], "every process runs as uid 1000");
      const ready = await (await fetch(`http://127.0.0.1:${c.port}/readyz`)).json();
      assert.equal(ready.checks.database, "ok");
      assert.deepEqual(downloads(c), [], "nothing fetched at start");
      const stop = await docker(["stop", c.name]);
      assert.equal(stop.code, 0, stop.err);
      assert.equal((await within("the container's exit", c.exited)).code, 0);
    } finally {
      await cleanUp();
    }
  },
);
