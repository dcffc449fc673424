/**
 * The worker's memory, measured precisely: spawns `main.ts` with its checkout's
 * `start` command line (bench/_start_command.ts), waits for `/readyz` 200, then
 * {@linkcode IDLE_MS} idle, and reads `/proc/<pid>/status` (VmRSS and its anonymous and
 * file-backed parts). With `--probe`, bench/_mem_probe.ts is preloaded and also reports V8's heap
 * (used, by space), external memory, code and bytecode, and the RSS and heap after one full GC.
 * With `--drain N`, it then drains N ingestion jobs of a tiny book (after a warm-up batch of
 * {@linkcode WARMUP_JOBS}) and reads the RSS {@linkcode IDLE_MS} after the last, as
 * `deno task bench` does, with the drain rate.
 *
 * ```sh
 * deno run -A bench/idle_rss.ts [--rounds 3] [--probe] [--drain 2000] [--idle 5000] \
 *   [--checkout DIR] \
 *   [--v8 --some-flag] [--deno --some-flag] [--env NAME=value]
 * ```
 *
 * `--checkout <dir>` measures that checkout's `main.ts` too (with its own `start` flags), in
 * interleaved rounds; `--v8` (a V8 flag), `--deno` (a `deno run` flag) and `--env` apply to this
 * checkout's worker only, to try one against the same code in one run. The database is
 * `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`), one schema per worker
 * measured. Figures are MB (10^6 bytes, as the bench's targets), medians of the rounds.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "../lib/db.ts";
import type { MemProbe, MemReading } from "./_mem_probe.ts";
import { startArgs } from "./_start_command.ts";

/**
 * Idle time after `/readyz` first answers 200, and after a drain, before a reading, ms (as
 * bench/runtime.ts; `--idle <ms>` for another, e.g. the steady state well after V8's own
 * memory reducer has run).
 */
export const IDLE_MS = 5000;
/** Jobs drained before the counted drain (`--drain`): first-use costs are not a job's. */
export const WARMUP_JOBS = 200;
const BOOK = "Bench Book\nby Bench\n\nCHAPTER I\n\nOne.\n\nCHAPTER II\n\nTwo.\n";

/** One worker to measure. */
interface Variant {
  label: string;
  dir: string;
  v8: string[];
  deno: string[];
  env: Record<string, string>;
}

/** One reading of a worker, in bytes (rates in jobs/s). */
interface Reading {
  /** Spawn → the first `/readyz` 200, ms. */
  readyMs: number;
  rss: number;
  anon: number;
  file: number;
  probe?: MemProbe;
  drainedRss?: number;
  drainedAnon?: number;
  jobsPerS?: number;
}

const args = [...Deno.args];
const take = (flag: string): string[] => {
  const values: string[] = [];
  for (let i = args.indexOf(flag); i >= 0; i = args.indexOf(flag)) {
    values.push(args[i + 1]);
    args.splice(i, 2);
  }
  return values;
};
const rounds = Number(take("--rounds")[0] ?? "3");
const drainJobs = Number(take("--drain")[0] ?? "0");
const idleMs = Number(take("--idle")[0] ?? IDLE_MS);
const checkouts = take("--checkout");
const v8 = take("--v8");
const deno = take("--deno");
const env = Object.fromEntries(take("--env").map((kv) => kv.split(/=(.*)/s).slice(0, 2)));
const probe = args.includes("--probe");
const url = Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";

const variants: Variant[] = [
  {
    label: [...v8, ...deno, ...Object.keys(env)].length ? "this (varied)" : "this",
    dir: new URL("..", import.meta.url).pathname.replace(/\/$/, ""),
    v8,
    deno,
    env,
  },
  ...checkouts.map((dir) => ({
    label: dir,
    dir: Deno.realPathSync(dir),
    v8: [],
    deno: [],
    env: {},
  })),
];

const status = (pid: number, field: string): number =>
  Number(
    new RegExp(`${field}:\\s+(\\d+)`).exec(Deno.readTextFileSync(`/proc/${pid}/status`))?.[1],
  ) *
  1024;

async function measure(variant: Variant, schema: string, storage: string): Promise<Reading> {
  const out = await Deno.makeTempFile({ prefix: "mem_probe_" });
  const [run, ...rest] = startArgs(variant.dir, variant.v8);
  const spawned = performance.now();
  const preload = probe
    ? [`--preload=${new URL("./_mem_probe.ts", import.meta.url).pathname}`]
    : [];
  const worker = new Deno.Command(Deno.execPath(), {
    args: [run, ...variant.deno, ...preload, ...rest],
    env: {
      DATABASE_URL: url,
      DATABASE_SCHEMA: schema,
      PORT: "0",
      INTERNAL_API_TOKEN: "idle-rss-token-0123456789",
      STORAGE_DIR: storage,
      POLL_INTERVAL_MS: "30000",
      LOG_LEVEL: "info",
      MEM_PROBE_OUT: out,
      ...variant.env,
    },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  try {
    const port = Promise.withResolvers<number>();
    // Read stdout to its end (a full pipe would stall the worker); the port is in the log.
    (async () => {
      let text = "";
      for await (const chunk of worker.stdout.pipeThrough(new TextDecoderStream())) {
        text += chunk;
        const found = /"msg":"http listening".*?"port":(\d+)|"port":(\d+).*?"msg":"http listening"/
          .exec(text);
        if (found) port.resolve(Number(found[1] ?? found[2]));
        text = text.slice(text.lastIndexOf("\n") + 1);
      }
      port.reject(new Error("The worker exited before it listened"));
    })();
    const base = `http://127.0.0.1:${await port.promise}`;
    const deadline = performance.now() + 60_000;
    while ((await fetch(`${base}/readyz`).then((r) => (r.body?.cancel(), r.status))) !== 200) {
      if (performance.now() > deadline) throw new Error("/readyz never answered 200");
      await sleep(100);
    }
    const readyMs = performance.now() - spawned;
    await sleep(idleMs);
    const reading: Reading = {
      readyMs,
      rss: status(worker.pid, "VmRSS"),
      anon: status(worker.pid, "RssAnon"),
      file: status(worker.pid, "RssFile"),
    };
    if (drainJobs > 0) {
      await drain(schema, WARMUP_JOBS);
      const ms = await drain(schema, drainJobs);
      reading.jobsPerS = drainJobs / (ms / 1000);
      await sleep(idleMs);
      reading.drainedRss = status(worker.pid, "VmRSS");
      reading.drainedAnon = status(worker.pid, "RssAnon");
    }
    if (probe) {
      worker.kill("SIGUSR2");
      const until = performance.now() + 10_000;
      while (!(await Deno.readTextFile(out))) {
        if (performance.now() > until) throw new Error("The memory probe never wrote");
        await sleep(50);
      }
      reading.probe = JSON.parse(await Deno.readTextFile(out));
    }
    return reading;
  } finally {
    worker.kill("SIGTERM");
    await worker.status;
    await Deno.remove(out);
  }
}

// Insert `jobs` ingestion jobs and wait until every one is finished; returns first claim → last
// finish, ms (database clock).
async function drain(schema: string, jobs: number): Promise<number> {
  const sql = connect(url, { schema, applicationName: "idle-rss-bench" });
  try {
    const [{ last }] = await sql<{ last: string | null }[]>`
      select coalesce(max(id), 0) as last from ingestion_jobs`;
    await sql`
      insert into ingestion_jobs (source_path) select 'book.txt' from generate_series(1, ${jobs})`;
    const deadline = performance.now() + 900_000;
    for (;;) {
      const [{ open }] = await sql<{ open: number }[]>`
        select count(*)::int as open from ingestion_jobs
        where id > ${last} and status not in ('Completed', 'Failed')`;
      if (open === 0) break;
      if (performance.now() > deadline) throw new Error("The drain timed out");
      await sleep(250);
    }
    const [{ ms, failed }] = await sql<{ ms: number; failed: number }[]>`
      select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 as ms,
             count(*) filter (where status = 'Failed')::int as failed
      from ingestion_jobs where id > ${last}`;
    if (failed > 0) throw new Error(`${failed} ingestion jobs failed`);
    return Number(ms);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const median = (xs: number[]): number => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)];
const mb = (bytes: number): string => (bytes / 1e6).toFixed(1);

const storage = await Deno.makeTempDir({ prefix: "idle_rss_" });
await Deno.writeTextFile(`${storage}/book.txt`, BOOK);
const results = variants.map(() => [] as Reading[]);
try {
  for (let round = 0; round < rounds; round++) {
    for (const [i, variant] of variants.entries()) {
      const reading = await measure(variant, `idle_rss_${i}`, storage);
      results[i].push(reading);
      console.error(
        `round ${round + 1}: ${variant.label}: ready after ${reading.readyMs.toFixed(0)} ms, ` +
          `RSS ${mb(reading.rss)} MB` +
          (reading.drainedRss ? `, ${mb(reading.drainedRss)} MB after the drain` : ""),
      );
    }
  }
} finally {
  await Deno.remove(storage, { recursive: true });
}

const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
console.log(`memory, MB (median of ${rounds}; load average ${load})`);
const rows: [string, (r: Reading) => number | undefined, ((x: number) => string)?][] = [
  ["ready after, ms", (r) => r.readyMs, (x) => x.toFixed(0)],
  [`VmRSS idle ${idleMs / 1000} s after ready`, (r) => r.rss],
  ["  anonymous", (r) => r.anon],
  ["  file-backed", (r) => r.file],
];
if (drainJobs > 0) {
  rows.push(
    [`VmRSS ${idleMs / 1000} s after ${drainJobs} jobs`, (r) => r.drainedRss],
    ["  anonymous", (r) => r.drainedAnon],
    ["drain, jobs/s", (r) => r.jobsPerS, (x) => x.toFixed(0)],
  );
}
if (probe) {
  const p = (f: (m: MemReading) => number, gc = false) => (r: Reading) => {
    const m = gc ? r.probe?.afterGc : r.probe?.before;
    return m ? f(m) : undefined;
  };
  const space = (name: string) => p((m) => m.spaces[name]?.used ?? 0);
  const when = drainJobs > 0 ? "after the drain" : "idle";
  rows.push(
    [`V8 heap used (${when})`, p((m) => m.heapUsed)],
    ["  old space", space("old_space")],
    ["  code space", space("code_space")],
    ["  new space", space("new_space")],
    ["  large objects", space("large_object_space")],
    ["V8 heap reserved", p((m) => m.heapTotal)],
    ["external", p((m) => m.external)],
    ["V8 malloc'd", p((m) => m.malloced)],
    ["bytecode + metadata", p((m) => m.bytecode)],
    ["code + metadata", p((m) => m.code)],
    ["after one full GC: RSS", p((m) => m.rss, true)],
    ["after one full GC: heap used", p((m) => m.heapUsed, true)],
  );
}
console.log(["", ...variants.map((v) => v.label)].join(" | "));
for (const [name, pick, format = mb] of rows) {
  const cells = results.map((rs) => {
    const xs = rs.map(pick).filter((x): x is number => x !== undefined);
    return xs.length ? format(median(xs)) : "-";
  });
  console.log([name, ...cells].join(" | "));
}
