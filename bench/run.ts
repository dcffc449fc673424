/**
 * `deno task bench`: spawns `main.ts` for real and measures, from database timestamps,
 * - start latency: commit of a job's INSERT → its claim, one job at a time, with a 30 s poll
 *   interval so only NOTIFY can wake the consumer;
 * - throughput: 1,000 jobs inserted in one transaction, first claim → last completion;
 * - the worker's resident memory (VmRSS) after the burst;
 * - EPUB extraction: synthetic big EPUBs (generated here, `tests/_epub.ts`) — 2,014
 *   chapters in ~10 MB, and a ~1 MB MathML textbook — extracted in this process (MB/s of wall
 *   and of CPU time), then ingested by the worker (MB/s claim → completion, its peak RSS, VmHWM);
 * - then the runtime section (bench/runtime.ts): statements, commits and WAL syncs per
 *   job, wake latency, drain throughput, RSS and the scale of claim and recovery, beside their
 *   targets (docs/performance.md).
 *
 * Flags: `--operations` runs the operations section only (bench/operations.ts: the list routes,
 * the dashboard and a bulk retry on 1,000,000 jobs); `--runtime` runs the runtime section only; `--peer` adds graphile-worker beside it (npm,
 * under Node; not part of CI); `--no-scale` skips its 1M-row scale part; `--checkout <dir>`
 * measures another checkout's worker in the runtime section's ingestion and scale parts, and
 * drains this checkout's ingestion beside it (before and after in one run); `--rounds <n>` repeats the drains in interleaved rounds and takes the
 * median drain ratios (the first round is the counted one).
 *
 * Uses `DATABASE_URL` when set, else a throwaway embedded PostgreSQL started with the runtime
 * section's settings (`pg_stat_statements` preloaded).
 *
 * @module
 */
import { connect } from "../lib/db.ts";
import { startEmbedded } from "../lib/embedded.ts";
import { createLogger } from "../lib/log.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import { runtimeBench, SERVER_SETTINGS } from "./runtime.ts";
import { startArgs } from "./_start_command.ts";
import { closeExtractor, extractBook } from "../books/extract.ts";
import { bigEpub } from "../tests/_epub.ts";
import { parseArgs } from "node:util";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    runtime: { type: "boolean", default: false },
    operations: { type: "boolean", default: false },
    peer: { type: "boolean", default: false },
    "no-scale": { type: "boolean", default: false },
    checkout: { type: "string" },
    rounds: { type: "string", default: "1" },
  },
});
const LATENCY_JOBS = 50;
const BURST_JOBS = 1000;
const BOOK = "Bench Book\nby Bench\n\nCHAPTER I\n\nOne.\n\nCHAPTER II\n\nTwo.\n";

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

let url = Deno.env.get("DATABASE_URL");
let stopEmbedded = (): Promise<void> => Promise.resolve();
if (!url) {
  const port = freePort();
  const pg = await startEmbedded({
    dir: `.data/bench-pg-${port}`,
    port,
    persistent: false,
    settings: SERVER_SETTINGS,
  });
  url = pg.url;
  stopEmbedded = pg.stop;
}
if (flags.operations) {
  // The operator's reads and the bulk retry on 1,000,000 jobs (bench/operations.ts), alone.
  const { operationsBench, printOperations } = await import("./operations.ts");
  let ok = false;
  try {
    ok = printOperations(await operationsBench(url));
  } finally {
    await stopEmbedded();
  }
  Deno.exit(ok ? 0 : 1);
}
if (!flags.runtime) await firstSections(url, stopEmbedded);

// After the sections above closed their pool: the runtime section counts by the worker's role,
// and waits until no session of that role is left before each reading.
try {
  await runtimeBench(url, {
    peer: flags.peer,
    scale: !flags["no-scale"],
    checkout: flags.checkout,
    rounds: Number(flags.rounds),
  });
} finally {
  await stopEmbedded();
}

/**
 * The sections before the runtime one: latency, throughput and RSS of the worker, the EPUBs.
 * Stops the embedded server itself when one fails (the runtime section would not run then).
 */
async function firstSections(url: string, stopEmbedded: () => Promise<void>): Promise<void> {
  const schema = `bench_${crypto.randomUUID().slice(0, 8)}`;
  const sql = connect(url, { schema, applicationName: "bench", max: 2 });
  await migrate(
    sql,
    schema,
    await readMigrations(new URL("../sql/", import.meta.url)),
    createLogger("silent"),
  );
  const storage = await Deno.makeTempDir({ prefix: "textstack-bench-" });
  await Deno.writeTextFile(`${storage}/book.txt`, BOOK);
  const EPUBS = [
    {
      name: "mathml.epub",
      what: "MathML textbook",
      bytes: bigEpub(200, { paragraphs: 1, math: 60 }),
    },
    { name: "big.epub", what: "2,014 chapters", bytes: bigEpub(2014, { paragraphs: 12 }) },
  ];
  for (const epub of EPUBS) await Deno.writeFile(`${storage}/${epub.name}`, epub.bytes);

  const worker = new Deno.Command(Deno.execPath(), {
    // As the worker is started (deno.json "start", Dockerfile).
    args: startArgs(new URL("..", import.meta.url).pathname.replace(/\/$/, "")),
    env: {
      DATABASE_URL: url,
      DATABASE_SCHEMA: schema,
      PORT: "0",
      INTERNAL_API_TOKEN: "bench-token-0123456789",
      STORAGE_DIR: storage,
      POLL_INTERVAL_MS: "30000",
      LOG_LEVEL: "warn",
    },
    stdout: "null",
    stderr: "inherit",
  }).spawn();

  async function until(
    what: string,
    check: () => Promise<boolean>,
    timeoutMs: number,
  ): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!(await check())) {
      if (performance.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** CPU time this process has used (all threads, the extraction worker's included), in ms. */
  function cpuMs(): number {
    const fields = Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  }

  /**
   * The EPUB section: each book extracted here, then ingested by the worker; the worker's VmHWM
   * (peak RSS over its life, which so far holds only its start and these ingests) after each.
   */
  async function benchEpubs(pid: number): Promise<string[]> {
    const lines = [
      `EPUB extraction (load average ${
        (await Deno.readTextFile("/proc/loadavg")).split(" ")[0]
      } on ${navigator.hardwareConcurrency} cores):`,
    ];
    for (const epub of EPUBS) {
      const mb = epub.bytes.length / 1e6;
      const cpu0 = cpuMs();
      const t0 = performance.now();
      const book = await extractBook(`${storage}/${epub.name}`, new AbortController().signal);
      const wallS = (performance.now() - t0) / 1000;
      const cpuS = (cpuMs() - cpu0) / 1000;
      closeExtractor();
      const [{ id }] = await sql<{ id: string }[]>`
        insert into ingestion_jobs (source_path) values (${epub.name}) returning id`;
      let ingestS = 0;
      await until(`the ${epub.name} job`, async () => {
        const [row] = await sql<{ status: string; s: number }[]>`
          select status, extract(epoch from finished_at - claimed_at)::float8 as s
          from ingestion_jobs where id = ${id}`;
        if (row.status === "Failed") throw new Error(`${epub.name} failed`);
        ingestS = row.s;
        return row.status === "Completed";
      }, 900_000);
      const status = await Deno.readTextFile(`/proc/${pid}/status`);
      const peakMiB = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
      lines.push(
        `  ${epub.what}, ${mb.toFixed(2)} MB, ${book.chapters.length} chapters: extract ${
          wallS.toFixed(2)
        } s = ${(mb / wallS).toFixed(2)} MB/s (CPU ${cpuS.toFixed(2)} s = ${
          (mb / cpuS).toFixed(2)
        } MB/s); ingest ${ingestS.toFixed(2)} s = ${
          (mb / ingestS).toFixed(2)
        } MB/s; worker peak RSS ${peakMiB.toFixed(1)} MiB`,
      );
    }
    return lines;
  }

  let sectionsDone = false;
  try {
    await until("the consumer's lock", async () => {
      const rows = await sql`
        select 1 from pg_stat_activity where application_name = 'textstack-lock-ingestion'`;
      return rows.length > 0;
    }, 30_000);
    // First, so the worker's peak RSS (VmHWM) is the EPUB ingest's, and its extraction worker is
    // warm before the latency jobs are timed.
    const epubLines = await benchEpubs(worker.pid);

    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_JOBS; i++) {
      const [{ id }] = await sql<{ id: string }[]>`
        insert into ingestion_jobs (source_path) values ('book.txt') returning id`;
      await until(`job ${id}`, async () => {
        const [row] = await sql<{ status: string; ms: number }[]>`
          select status, extract(epoch from claimed_at - created_at) * 1000 as ms
          from ingestion_jobs where id = ${id}`;
        if (row.status !== "Completed") return false;
        latencies.push(Number(row.ms));
        return true;
      }, 10_000);
    }
    latencies.sort((a, b) => a - b);

    await sql`truncate ingestion_jobs, chapters, editions cascade`;
    await sql`insert into ingestion_jobs (source_path) select 'book.txt' from generate_series(1, ${BURST_JOBS})`;
    await until("the burst", async () => {
      const [{ n }] = await sql<{ n: number }[]>`
        select count(*)::int as n from ingestion_jobs where status = 'Completed'`;
      return n === BURST_JOBS;
    }, 300_000);
    const [burst] = await sql<{ ms: number }[]>`
      select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 as ms from ingestion_jobs`;
    const status = await Deno.readTextFile(`/proc/${worker.pid}/status`);
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);

    const fmt = (n: number) => n.toFixed(1);
    console.log(`start latency (commit → claim, NOTIFY only, n=${LATENCY_JOBS}):`);
    console.log(
      `  p50 ${fmt(percentile(latencies, 50))} ms, p95 ${fmt(percentile(latencies, 95))} ms, max ${
        fmt(latencies.at(-1)!)
      } ms`,
    );
    console.log(
      `throughput: ${BURST_JOBS} jobs from one INSERT in ${fmt(Number(burst.ms))} ms = ${
        fmt(BURST_JOBS / (Number(burst.ms) / 1000))
      } jobs/s`,
    );
    console.log(`worker RSS after the burst: ${fmt(rssKb / 1024)} MiB`);
    for (const line of epubLines) console.log(line);
    sectionsDone = true;
  } finally {
    worker.kill("SIGTERM");
    await worker.status;
    await sql`drop schema if exists ${sql(schema)} cascade`;
    await sql.end();
    if (!sectionsDone) await stopEmbedded();
    await Deno.remove(storage, { recursive: true });
  }
}
