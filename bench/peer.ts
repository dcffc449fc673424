/**
 * The graphile-worker peer of the runtime section (`deno task bench --peer`; not part of
 * CI): graphile-worker {@linkcode GRAPHILE_VERSION} at concurrency 1, under Node
 * (bench/graphile_peer.mjs), on the same database, with the same job counts, counted by the same
 * {@linkcode Observer}. It is installed with npm into `.data/bench-peer/` on first use (a bench
 * dependency only; the worker never loads it).
 *
 * @module
 */
import type { Sql } from "../lib/db.ts";
import { type Cost, type Observer, progress } from "./_observer.ts";

/** The peer's version: the latest 0.17 on npm, the one the issue measured against. */
export const GRAPHILE_VERSION = "0.17.3";
const PEER_DIR = new URL("../.data/bench-peer/", import.meta.url).pathname;
const SCRIPT = new URL("./graphile_peer.mjs", import.meta.url).pathname;

/** What one peer drain measured. */
export interface PeerRun {
  /** Only for a counted run. */
  cost?: Cost;
  jobsPerS: number;
  rssIdle: number;
  rssAfter: number;
}

/**
 * Install graphile-worker with npm into `.data/bench-peer/` unless that version is there.
 *
 * @returns false (with a message) when Node or npm is missing or the install fails.
 */
export async function installPeer(): Promise<boolean> {
  try {
    const pkg = JSON.parse(
      await Deno.readTextFile(`${PEER_DIR}node_modules/graphile-worker/package.json`),
    );
    if (pkg.version === GRAPHILE_VERSION) return true;
  } catch {
    // Not installed yet.
  }
  progress(`peer: npm install graphile-worker@${GRAPHILE_VERSION} into ${PEER_DIR}`);
  try {
    await Deno.mkdir(PEER_DIR, { recursive: true });
    // A package.json of its own, so npm does not climb to this repository's node_modules.
    await Deno.writeTextFile(`${PEER_DIR}package.json`, '{ "private": true }\n');
    const out = await new Deno.Command("npm", {
      args: ["install", "--no-audit", "--no-fund", `graphile-worker@${GRAPHILE_VERSION}`],
      cwd: PEER_DIR,
      stdout: "null",
      stderr: "piped",
    }).output();
    if (out.success) return true;
    console.log(`\npeer skipped: npm install failed: ${new TextDecoder().decode(out.stderr)}`);
  } catch (err) {
    console.log(`\npeer skipped: cannot run npm (${err}); install Node.js to compare`);
  }
  return false;
}

/**
 * Drain `jobs` graphile-worker jobs of `task` on the bench's schema, as the worker's drains are
 * measured (bench/runtime.ts): the runner up and idle, a warm-up batch, a settle, then the jobs in
 * one INSERT; counted by the observer unless `count` is false (the drain rate only).
 *
 * @param url the worker role's URL (graphile-worker connects as it).
 * @param obs the observer, on the bench's schema (which gets `bench_peer_chapters`).
 * @param storage a directory holding `book.txt`; the `ingest` task writes under it.
 * @param waits `idleMs` before the idle RSS and after the drain; `settleMs` after the warm-up;
 *   `warmup` jobs.
 * @throws when the peer fails or a phase takes over 10 minutes.
 */
export async function runPeer(
  url: string,
  obs: Observer,
  workerRole: string,
  task: "noop" | "ingest",
  jobs: number,
  storage: string,
  waits: { idleMs: number; settleMs: number; warmup: number },
  count: boolean,
): Promise<PeerRun> {
  const schema = `graphile_worker_${crypto.randomUUID().slice(0, 8)}`;
  await obs.query((sql: Sql) =>
    sql`create table if not exists bench_peer_chapters (
          job_id bigint not null, position integer not null, html text not null)`
  );
  progress(
    `peer: graphile-worker ${GRAPHILE_VERSION} c1, ${task}, ${jobs} jobs${
      count ? "" : " (rate only)"
    }`,
  );
  const child = new Deno.Command("node", {
    args: [SCRIPT],
    env: {
      PEER_DIR,
      PEER_URL: url,
      PEER_SCHEMA: schema,
      PEER_BENCH_SCHEMA: obs.schema,
      PEER_JOBS: String(jobs),
      PEER_WARMUP: String(waits.warmup),
      PEER_IDLE_MS: String(waits.idleMs),
      PEER_SETTLE_MS: String(count ? waits.settleMs : 0),
      PEER_STORAGE: storage,
    },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).values();
  let buffered = "";
  const next = async (): Promise<Record<string, number>> => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 600_000);
    try {
      while (!buffered.includes("\n")) {
        const { value, done } = await lines.next();
        if (done) throw new Error("The graphile-worker peer exited early");
        buffered += value;
      }
      const at = buffered.indexOf("\n");
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      return JSON.parse(line);
    } finally {
      clearTimeout(timer);
    }
  };
  const add = (n: number) =>
    obs.query((sql: Sql) =>
      sql`select ${sql(schema)}.add_job(${task}) from generate_series(1, ${n})`
    );
  try {
    const ready = await next();
    await add(waits.warmup);
    await next(); // warmed
    const from = count ? await obs.before() : undefined;
    await add(jobs);
    const done = await next();
    const status = await child.status;
    if (!status.success) throw new Error(`The graphile-worker peer exited with ${status.code}`);
    return {
      cost: from ? await obs.after(from, jobs, workerRole) : undefined,
      jobsPerS: jobs / (done.ms / 1000),
      rssIdle: ready.rssIdle,
      rssAfter: done.rssAfter,
    };
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // already exited
    }
    await child.status;
    await obs.query((sql: Sql) => sql`drop schema if exists ${sql(schema)} cascade`);
  }
}
