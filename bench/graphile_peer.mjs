// The graphile-worker side of `deno task bench --peer`, run under Node by bench/peer.ts:
// a runner at concurrency 1 (the usual choice for a sequential Node queue) on the bench's
// database, with one task: `noop` (returns at once) or `ingest` (the comparable work: read the
// book file, insert its chapters as rows, write one file).
//
// It talks to the bench in JSON lines on stdout:
//   {"ready": true, "rssIdle": MiB}  after the runner started and idled PEER_IDLE_MS
//   {"warmed": true}                 after PEER_WARMUP jobs succeeded and it idled PEER_SETTLE_MS
//   {"done": true, "ms": …, "jobs": …, "rssAfter": MiB}  after PEER_JOBS more jobs succeeded (ms:
//                                    their first start to their last success) and it idled
//                                    PEER_IDLE_MS again; then it stops and exits
// graphile-worker is loaded from PEER_DIR (where bench/peer.ts installed it with npm), not from
// this repository: it is a bench dependency only, never the worker's.
import { createRequire } from "node:module";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";

const env = process.env;
const require = createRequire(`${env.PEER_DIR}/package.json`);
const { run, Logger } = require("graphile-worker");

const jobs = Number(env.PEER_JOBS);
const idleMs = Number(env.PEER_IDLE_MS);
const schema = env.PEER_SCHEMA;
const table = `"${env.PEER_BENCH_SCHEMA}".bench_peer_chapters`;
const out = `${env.PEER_STORAGE}/peer`;
await mkdir(out, { recursive: true });
const mib = () => process.memoryUsage().rss / 1024 / 1024;

const taskList = {
  noop: async () => {},
  ingest: async (_payload, helpers) => {
    const text = await readFile(`${env.PEER_STORAGE}/book.txt`, "utf8");
    const chapters = text.split(/\n(?=CHAPTER )/).slice(1);
    await helpers.withPgClient((client) =>
      client.query(
        `insert into ${table} (job_id, position, html)
         select $1, c.position, c.html from unnest($2::text[]) with ordinality as c(html, position)`,
        [helpers.job.id, chapters.map((c) => `<p>${c.trim()}</p>`)],
      )
    );
    await writeFile(`${out}/${helpers.job.id}.html`, chapters.join("\n"));
  },
};

const runner = await run({
  connectionString: env.PEER_URL,
  schema,
  concurrency: 1,
  noHandleSignals: true,
  pollInterval: 30_000, // like the worker's bench: only NOTIFY and the end of a job wake it
  taskList,
  logger: new Logger(() => () => {}),
});
let done = 0;
let first = 0;
let last = 0;
let marks = [];
const warmup = Number(env.PEER_WARMUP);
// Resolves when `done` reaches `target` (Node 20 has no Promise.withResolvers).
const reach = (target) => new Promise((resolve, reject) => marks.push({ target, resolve, reject }));
runner.events.on("job:start", () => {
  if (first === 0 && done >= warmup) first = performance.now();
});
runner.events.on("job:success", () => {
  last = performance.now();
  done++;
  for (const m of marks) if (done === m.target) m.resolve();
});
runner.events.on("job:error", ({ error }) => {
  for (const m of marks) m.reject(error);
  marks = [];
});
// Idle RSS after PEER_IDLE_MS, as the worker's is read.
await sleep(idleMs);
const rssIdle = mib();
console.log(JSON.stringify({ ready: true, rssIdle }));
// The bench queues the warm-up batch now; once it is done, the runner settles (its counters
// reported) before the bench's "before" reading and the counted jobs.
await reach(warmup);
await sleep(Number(env.PEER_SETTLE_MS));
console.log(JSON.stringify({ warmed: true }));
await reach(warmup + jobs);
await sleep(idleMs);
console.log(JSON.stringify({ done: true, ms: last - first, jobs, rssAfter: mib() }));
await runner.stop();
