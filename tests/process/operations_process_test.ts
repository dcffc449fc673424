/**
 * The operator's tools against a real `main.ts`: `deno task jobs` (cli/jobs.ts, run as its own
 * process, talking HTTP with the worker's generated token file), a pause that `/readyz` and
 * `/metrics` show and that survives a restart, and the default process metrics under Deno.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { dbTest, waitFor } from "../_db.ts";
import { spawnWorker, type WorkerProcess } from "../_worker.ts";
import { SMALL_BOOK } from "../_ingestion.ts";
import parsePrometheusTextFormat from "parse-prometheus-text-format";

const CLI = new URL("../../cli/jobs.ts", import.meta.url).pathname;

/** Run the CLI as an operator would; its stdout, stderr and exit code. */
async function jobs(env: Record<string, string>, ...args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net", "--allow-env", "--allow-read", CLI, ...args],
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

async function stop(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  await worker.exited;
}

dbTest(
  "deno task jobs over the API: queues, stats, list, show, bulk retry with confirmation, cancel, pause and resume; exit codes; pause in /readyz and /metrics, kept across a restart; process_* metrics",
  async (db) => {
    const dataDir = await Deno.makeTempDir({ prefix: "textstack-ops-data-" });
    const storage = await Deno.makeTempDir({ prefix: "textstack-ops-storage-" });
    // No INTERNAL_API_TOKEN: the worker generates its token file, which the CLI reads.
    const workerEnv = {
      INTERNAL_API_TOKEN: "",
      DATA_DIR: dataDir,
      STORAGE_DIR: storage,
      SITE_DIR: `${dataDir}/site`,
      STATS_INTERVAL_MS: "300",
    };
    let worker = spawnWorker(db, workerEnv);
    try {
      const base = await worker.baseUrl();
      await waitFor(
        "the worker to be ready",
        async () => (await fetch(`${base}/readyz`)).ok,
        60_000,
        100,
      );
      const env = { WORKER_URL: base, DATA_DIR: dataDir };
      const token = (await Deno.readTextFile(`${dataDir}/internal_api_token`)).trim();
      const post = (path: string, body: unknown) =>
        fetch(`${base}/internal${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        }).then((r) => r.json());

      const queues = await jobs(env, "queues");
      assert.equal(queues.code, 0, queues.stderr);
      for (
        const name of [
          "ingestion",
          "user_ingestion",
          "enrichment",
          "ssg",
          "auto_publish",
          "seo_backfill",
        ]
      ) {
        assert.match(queues.stdout, new RegExp(`^${name}\\s`, "m"));
      }
      const asJson = JSON.parse((await jobs(env, "queues", "--json")).stdout);
      assert.equal(asJson.length, 6);
      assert.equal(asJson[0].state, "holding");

      // A book the reader refuses fails at once; it shows in the list and with its attempt.
      await Deno.writeTextFile(`${storage}/bad.txt`, "CHAPTER I\n\nbroken\u0000text\n");
      const bad = await post("/ingestion/jobs", { source_path: "bad.txt" });
      await waitFor(
        "the job to fail",
        async () =>
          (await fetch(`${base}/internal/ingestion/jobs/${bad.id}`, {
            headers: { authorization: `Bearer ${token}` },
          }).then((r) => r.json())).status === "Failed",
        60_000,
        100,
      );
      const list = await jobs(env, "list", "ingestion", "--status", "Failed");
      assert.equal(list.code, 0, list.stderr);
      assert.match(list.stdout, new RegExp(`^${bad.id}\\s+Failed\\s+1\\s+bad\\.txt`, "m"));
      const listed = JSON.parse(
        (await jobs(env, "list", "ingestion", "--q", "bad", "--json")).stdout,
      );
      assert.deepEqual(listed.jobs.map((j: { id: string }) => j.id), [bad.id]);
      const show = await jobs(env, "show", "ingestion", bad.id);
      assert.equal(show.code, 0, show.stderr);
      assert.match(show.stdout, /^status\s+Failed$/m);
      assert.match(show.stdout, /attempts:\n.*#.*outcome[^\n]*\n[^\n]*\n\s+1\s.*failed/s);

      // Bulk retry: counted, refused without a confirmation when nobody can answer, then done.
      const unconfirmed = await jobs(env, "retry", "ingestion", "--status", "Failed");
      assert.equal(unconfirmed.code, 1);
      assert.match(unconfirmed.stderr, /1 Failed ingestion jobs: add --yes/);
      // Paused first, so the retried job stays Queued for the cancel below.
      const paused = await jobs(env, "pause", "ingestion");
      assert.equal(paused.code, 0, paused.stderr);
      assert.match(paused.stdout, /ingestion: paused since/);
      const retried = await jobs(
        env,
        "retry",
        "ingestion",
        "--status",
        "Failed",
        "--yes",
        "--json",
      );
      assert.equal(retried.code, 0, retried.stderr);
      assert.equal(JSON.parse(retried.stdout).retried, 1);
      await sleep(500);
      const held = await jobs(env, "show", "ingestion", bad.id, "--json");
      assert.equal(JSON.parse(held.stdout).status, "Queued", "a paused queue claims nothing");

      const ready = await fetch(`${base}/readyz`);
      assert.equal(ready.status, 200, "a paused queue is still ready");
      const readiness = await ready.json();
      assert.deepEqual(readiness.paused, ["ingestion"]);
      assert.equal(readiness.checks.queues.ingestion, "holding");

      const metrics = parsePrometheusTextFormat(
        await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } }))
          .text(),
      ) as { name: string; metrics: { value: string; labels?: Record<string, string> }[] }[];
      const series = (name: string) => metrics.find((m) => m.name === name)?.metrics ?? [];
      const pausedGauge = series("textstack_worker_queue_paused");
      assert.equal(pausedGauge.find((m) => m.labels?.queue === "ingestion")?.value, "1");
      assert.equal(pausedGauge.find((m) => m.labels?.queue === "ssg")?.value, "0");
      // The default process series work under Deno. The worker runs with the start task's
      // explicit permissions, so /proc/self is closed to it (Deno grants it only with every
      // permission): RSS comes from Deno.memoryUsage(), and the descriptor counts, which have no
      // other source, are left out rather than read as 0.
      for (
        const name of [
          "process_resident_memory_bytes",
          "process_cpu_seconds_total",
          "nodejs_eventloop_lag_seconds",
          "nodejs_heap_size_used_bytes",
        ]
      ) {
        const value = Number(series(name)[0]?.value);
        assert.ok(Number.isFinite(value) && value >= 0, `${name} = ${series(name)[0]?.value}`);
      }
      assert.ok(Number(series("process_resident_memory_bytes")[0].value) > 10_000_000);
      assert.deepEqual(series("process_open_fds"), [], "no descriptor count read as 0");

      const cancelled = await jobs(env, "cancel", "ingestion", bad.id);
      assert.equal(cancelled.code, 0, cancelled.stderr);
      assert.match(cancelled.stdout, /Failed \(cancelled by admin\)/);
      const again = await jobs(env, "cancel", "ingestion", bad.id);
      assert.equal(again.code, 1, "a finished job is refused");
      assert.match(again.stderr, /Failed already/);

      // Exit codes a script can use.
      assert.equal((await jobs(env, "show", "ingestion", "999999")).code, 3);
      assert.equal((await jobs(env, "list", "nope")).code, 2);
      assert.equal((await jobs(env, "frobnicate")).code, 2);
      assert.equal(
        (await jobs({ ...env, INTERNAL_API_TOKEN: "wrong-token-000000000" }, "queues")).code,
        4,
      );
      assert.equal(
        (await jobs({ WORKER_URL: "http://127.0.0.1:9", INTERNAL_API_TOKEN: "x" }, "queues")).code,
        5,
      );

      // The pause survives a restart; resume lets the queue claim again.
      await stop(worker);
      worker = spawnWorker(db, workerEnv);
      const base2 = await worker.baseUrl();
      await waitFor(
        "the restarted worker to be ready",
        async () => (await fetch(`${base2}/readyz`)).ok,
        60_000,
        100,
      );
      assert.deepEqual((await (await fetch(`${base2}/readyz`)).json()).paused, ["ingestion"]);
      const env2 = { ...env, WORKER_URL: base2 };
      await Deno.writeTextFile(`${storage}/good.txt`, SMALL_BOOK);
      const good = await (await fetch(`${base2}/internal/ingestion/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ source_path: "good.txt" }),
      })).json();
      await sleep(400);
      assert.equal(
        JSON.parse((await jobs(env2, "show", "ingestion", good.id, "--json")).stdout).status,
        "Queued",
      );
      const resumed = await jobs(env2, "resume", "ingestion");
      assert.equal(resumed.code, 0, resumed.stderr);
      await waitFor(
        "the job to complete once resumed",
        async () =>
          JSON.parse((await jobs(env2, "show", "ingestion", good.id, "--json")).stdout).status ===
            "Completed",
        60_000,
        200,
      );
      const stats = await jobs(env2, "stats");
      assert.equal(stats.code, 0, stats.stderr);
      assert.match(
        stats.stdout,
        /^ingestion\s+Queued \d+, Processing \d+, Completed \d+, Failed \d+/m,
      );
    } finally {
      await stop(worker);
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(storage, { recursive: true }).catch(() => {});
    }
  },
);
