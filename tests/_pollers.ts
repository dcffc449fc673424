/**
 * The host pollers under faults, run for real: a spawned worker, the poller script under dash or
 * bash (as systemd runs `/bin/sh`), a slow or lossy HTTP proxy between them (tests/_http_proxy.ts),
 * an IndexNow stub counting pings, and a stop the way systemd does it (SIGTERM to the script, then
 * SIGKILL at TimeoutStopSec; with KillMode=mixed whatever is left of the step is SIGKILLed once the
 * script exits), then a restarted poller that runs whatever was given back. Each scenario returns a {@linkcode StopReport}; tests/process/host_poller_stop_test.ts
 * asserts on it and bench/chaos.ts prints it as a row.
 *
 * @module
 */
import type { Sql } from "../lib/db.ts";
import { collectJsonLines, TEST_TOKEN, type WorkerProcess } from "./_worker.ts";
import { type HttpProxy, startHttpProxy } from "./_http_proxy.ts";
import { insertEdition, listening } from "./_host.ts";

const HOST_DIR = new URL("../host/", import.meta.url).pathname;

/** The shells a poller is tested under: dash is Debian's `/bin/sh`. */
export const SHELLS = ["dash", "bash"] as const;
export type Shell = typeof SHELLS[number];

/** A poller script running under a shell, its stderr lines collected. */
export interface Poller {
  child: Deno.ChildProcess;
  lines: string[];
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<Deno.CommandStatus>;
}

/** Run `host/<script>` with `shell`, with a clean environment plus `env`. */
export function runPoller(shell: Shell, script: string, env: Record<string, string>): Poller {
  const child = new Deno.Command(shell, {
    args: [`${HOST_DIR}${script}`],
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", TEXTSTACK_TOKEN: TEST_TOKEN, ...env },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: Array<Record<string, unknown>> = [];
  const err: Array<Record<string, unknown>> = [];
  const lines: string[] = [];
  const pumps = Promise.all([
    collectJsonLines(child.stdout, out, () => lines.push(String(out.at(-1)?.msg)), "stdout: "),
    collectJsonLines(child.stderr, err, () => lines.push(String(err.at(-1)?.msg))),
  ]);
  const exited = Promise.all([child.status, pumps]).then(([status]) => status);
  return {
    child,
    lines,
    exited,
    waitForLine: (pattern, timeoutMs = 30_000) =>
      until(() => lines.find((l) => pattern.test(l)), timeoutMs).then((l) => {
        if (l === undefined) {
          throw new Error(`No line matching ${pattern} in ${JSON.stringify(lines)}`);
        }
        return l;
      }),
  };
}

async function until<T>(check: () => T | undefined | Promise<T | undefined>, ms: number) {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    const v = await Promise.resolve().then(check).catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  return undefined;
}

/** How the poller's stop ended. */
interface Stopped {
  code: number | null;
  signal: string | null;
  ms: number;
}

/**
 * Whether process group `pgid` has a member that is not a zombie: read from each
 * `/proc/<pid>/stat` (its state and pgrp fields, proc(5)), so no `ps` (procps) is needed.
 */
export async function groupAlive(pgid: number): Promise<boolean> {
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const stat = await Deno.readTextFile(`/proc/${entry.name}/stat`).catch(() => ""); // ended
    if (!stat) continue;
    // `pid (comm) state ppid pgrp …`: comm may hold spaces or ")", so split after the last ")".
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z") return true;
  }
  return false;
}

/** One scenario's outcome: a chaos row, and what the tests assert on. */
export interface StopReport {
  scenario: string;
  shell: Shell;
  enqueued: number;
  completed: number;
  failed: number;
  /** Jobs back in `Queued` with no attempt counted at the end (given back, not run again). */
  queued: number;
  /** Jobs left `Running` at the end (stranded). */
  running: number;
  /** Give-backs the poller logged. */
  givenBack: number;
  /** Host effects (the step's own publish), per job id. */
  effects: Record<string, number>;
  /** IndexNow pings per edition. */
  pings: Record<string, number>;
  /** Effects or pings beyond one per job or edition. */
  doubleEffects: number;
  /** Attempts counted beyond one per completed job. */
  extraAttempts: number;
  exitCode: number | null;
  exitSignal: string | null;
  stopMs: number;
  timeoutStopS: number;
  /** A step's process group still alive when the script exited. */
  stepOutlived: boolean;
  lines: string[];
  errors: Record<string, string | null>;
}

/** A worker to run the scenarios against, with an IndexNow stub. */
export interface HostStage {
  sql: Sql;
  url: string;
  pings: string[];
  close(): Promise<void>;
}

/**
 * Start a worker (through `spawn`, which sets its database, schema and directories) with an
 * IndexNow stub; `close` stops both.
 */
export async function hostStage(
  sql: Sql,
  spawn: (env: Record<string, string>) => WorkerProcess,
): Promise<HostStage> {
  const pings: string[] = [];
  const stub = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.json();
    for (const u of body.urlList ?? []) pings.push(/editions\/(\d+)\//.exec(u)?.[1] ?? u);
    return new Response(null, { status: 202 });
  });
  const worker = spawn({
    INDEXNOW_URL: `http://127.0.0.1:${stub.addr.port}/indexnow`,
    INDEXNOW_KEY: "key-0123456789",
    SITE_URL: "https://books.example/",
  });
  const url = await listening(worker);
  return {
    sql,
    url,
    pings,
    async close() {
      worker.child.kill("SIGTERM");
      await worker.exited;
      await stub.shutdown();
    },
  };
}

type Queue = "auto-publish" | "seo";
const TABLE: Record<Queue, string> = {
  "auto-publish": "auto_publish_jobs",
  seo: "seo_backfill_jobs",
};
const SCRIPT: Record<Queue, string> = {
  "auto-publish": "seo-publish-poll.sh",
  seo: "seo-backfill-poll.sh",
};

/** A step that records its pid (its group) and, as its effect, a line with the job id. */
function step(dir: string, queue: Queue, body: string): string {
  const effect = queue === "seo"
    ? `echo "$id" >> ${dir}/effects; printf '{"meta_title":"T","meta_description":"D","meta_keywords":["k"]}'`
    : `echo "$id" >> ${dir}/effects; echo published`;
  return `id=$(jq -r .id); echo $$ >> ${dir}/pids; ${
    body.replaceAll("EFFECT", effect).replaceAll("STARTED", `${dir}/started`)
  }`;
}

interface Run {
  queue: Queue;
  scenario: string;
  jobs: number;
  /** The step, with EFFECT where it does its effect. */
  body: string;
  env?: Record<string, string>;
  /** Before the stop: set up the fault, wait for the moment to stop (false: no stop). */
  before(ctx: { proxy: HttpProxy; poller: Poller; dir: string; ids: string[] }): Promise<boolean>;
  timeoutStopS?: number;
}

async function scenario(stage: HostStage, shell: Shell, run: Run): Promise<StopReport> {
  const { sql } = stage;
  const table = TABLE[run.queue];
  await sql`delete from auto_publish_jobs`;
  await sql`delete from seo_backfill_jobs`;
  stage.pings.splice(0);
  const ids: string[] = [];
  for (let i = 0; i < run.jobs; i++) {
    const edition = await insertEdition(sql, `Book ${i}`);
    const [r] = await sql<{ id: string }[]>`
      insert into ${sql(table)} (edition_id) values (${edition}) returning id`;
    ids.push(r.id);
  }
  const dir = await Deno.makeTempDir({ prefix: "textstack-poll-" });
  const proxy = startHttpProxy(stage.url);
  const timeoutStopS = run.timeoutStopS ?? 20;
  const env = {
    TEXTSTACK_URL: proxy.url,
    POLL_INTERVAL_S: "1",
    BACKOFF_MAX_S: "1",
    SEO_BATCH: String(run.jobs),
    [run.queue === "seo" ? "SEO_COMMAND" : "PUBLISH_COMMAND"]: step(dir, run.queue, run.body),
    ...run.env,
  };
  const groups = async () =>
    (await Deno.readTextFile(`${dir}/pids`).catch(() => "")).split("\n").filter(Boolean).map(
      Number,
    );
  const poller = runPoller(shell, SCRIPT[run.queue], env);
  let stopped: Stopped = { code: null, signal: null, ms: 0 };
  let outlived = false;
  let lines: string[] = [];
  try {
    const stop = await run.before({ proxy, poller, dir, ids });
    if (stop) {
      // What systemd's SIGKILL would end once the script exited is looked at first.
      const t0 = performance.now();
      poller.child.kill("SIGTERM");
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = new Promise<"timeout">((r) =>
        timer = setTimeout(() => r("timeout"), timeoutStopS * 1000)
      );
      const first = await Promise.race([poller.child.status, timedOut]);
      clearTimeout(timer);
      if (first === "timeout") poller.child.kill("SIGKILL");
      const status = await poller.exited;
      stopped = {
        code: status.code,
        signal: status.signal,
        ms: Math.round(performance.now() - t0),
      };
      for (const g of await groups()) if (await groupAlive(g)) outlived = true;
      // KillMode=mixed: what is left of the unit gets SIGKILL.
      for (const g of await groups()) {
        try {
          Deno.kill(-g, "SIGKILL");
        } catch { /* gone */ }
      }
      lines = [...poller.lines];
      // The poller restarts (a deploy): jobs given back run again, once.
      if (await sql`select 1 from ${sql(table)} where status = 'Queued'`.then((r) => r.length)) {
        const again = runPoller(shell, SCRIPT[run.queue], {
          ...env,
          [run.queue === "seo" ? "SEO_COMMAND" : "PUBLISH_COMMAND"]: step(dir, run.queue, "EFFECT"),
        });
        await until(async () => {
          const [{ n }] = await sql<{ n: number }[]>`
            select count(*)::int as n from ${sql(table)} where status in ('Queued', 'Running')`;
          return n === 0 || undefined;
        }, 15_000);
        again.child.kill("SIGTERM");
        await again.exited;
        lines.push(...again.lines.map((l) => `(restart) ${l}`));
      }
    } else {
      const t0 = performance.now();
      poller.child.kill("SIGTERM");
      const status = await poller.exited;
      stopped = {
        code: status.code,
        signal: status.signal,
        ms: Math.round(performance.now() - t0),
      };
      lines = [...poller.lines];
    }
  } finally {
    try {
      poller.child.kill("SIGKILL");
    } catch { /* exited */ }
    await poller.exited;
    for (const g of await groups()) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch { /* gone */ }
    }
    await proxy.close();
  }
  // Let IndexNow pings of the last completes arrive.
  await new Promise((r) => setTimeout(r, 300));
  const rows = await sql<
    { id: string; status: string; attempt_count: number; error: string | null }[]
  >`
    select id, status, attempt_count, error from ${sql(table)} order by id`;
  const effects: Record<string, number> = {};
  for (const id of (await Deno.readTextFile(`${dir}/effects`).catch(() => "")).split("\n")) {
    if (id) effects[id] = (effects[id] ?? 0) + 1;
  }
  const pings: Record<string, number> = {};
  for (const e of stage.pings) pings[e] = (pings[e] ?? 0) + 1;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  const over = (m: Record<string, number>) =>
    Object.values(m).reduce((s, n) => s + Math.max(0, n - 1), 0);
  const completed = rows.filter((r) => r.status === "Completed");
  return {
    scenario: run.scenario,
    shell,
    enqueued: run.jobs,
    completed: completed.length,
    failed: rows.filter((r) => r.status === "Failed").length,
    queued: rows.filter((r) => r.status === "Queued" && r.attempt_count === 0).length,
    running: rows.filter((r) => r.status === "Running").length,
    givenBack: lines.filter((l) => !l.startsWith("(restart)") && / given back$/.test(l)).length,
    effects,
    pings,
    doubleEffects: over(effects) + over(pings),
    extraAttempts: completed.reduce((s, r) => s + Math.max(0, r.attempt_count - 1), 0),
    exitCode: stopped.code,
    exitSignal: stopped.signal,
    stopMs: stopped.ms,
    timeoutStopS,
    stepOutlived: outlived,
    lines,
    errors: Object.fromEntries(rows.map((r) => [r.id, r.error])),
  };
}

const CLAIM = (queue: Queue) =>
  new RegExp(`^POST /internal/${queue === "seo" ? "seo" : "auto-publish"}/jobs/claim`);

async function settledAll(sql: Sql, queue: Queue, ms: number): Promise<boolean> {
  return (await until(async () => {
    const [{ n }] = await sql<{ n: number }[]>`
      select count(*)::int as n from ${sql(TABLE[queue])} where status in ('Queued', 'Running')`;
    return n === 0 || undefined;
  }, ms)) === true;
}

/** The first claim's answer is lost (it committed); the poller must still run every job once. */
export function lostClaimAnswer(stage: HostStage, shell: Shell, queue: Queue) {
  return scenario(stage, shell, {
    queue,
    scenario: `lost claim answer (${queue})`,
    jobs: queue === "seo" ? 3 : 2,
    body: "EFFECT",
    before: async ({ proxy }) => {
      proxy.rule({ match: CLAIM(queue), lose: 1 });
      await settledAll(stage.sql, queue, 20_000);
      return false;
    },
  });
}

/** SIGTERM while the claim's answer is held back by a slow worker (the claim has committed). */
export function termDuringClaim(stage: HostStage, shell: Shell, queue: Queue) {
  return scenario(stage, shell, {
    queue,
    scenario: `SIGTERM during a claim (${queue})`,
    jobs: queue === "seo" ? 3 : 1,
    body: "EFFECT",
    before: async ({ proxy }) => {
      proxy.rule({ match: CLAIM(queue), delayMs: 2000 });
      await until(async () => {
        const r = await stage.sql`select 1 from ${
          stage.sql(TABLE[queue])
        } where status = 'Running'`;
        return r.length > 0 || undefined;
      }, 20_000);
      return true;
    },
  });
}

/** The step, once SIGTERMed: "ignores" (runs 30 s more), "finishes" (2 s more, then its effect), or "dies". */
export type StepKind = "ignores" | "finishes" | "dies";
const STEPS: Record<StepKind, string> = {
  ignores: `trap '' TERM; touch STARTED; sleep 30; EFFECT`,
  finishes: `trap '' TERM; touch STARTED; sleep 2; EFFECT`,
  dies: `touch STARTED; sleep 30; EFFECT`,
};

/** SIGTERM once the auto-publish step has started: the step must not outlive what is settled. */
export function stepAtStop(stage: HostStage, shell: Shell, kind: StepKind) {
  return scenario(stage, shell, {
    queue: "auto-publish",
    scenario: `step ${
      kind === "ignores"
        ? "ignoring SIGTERM"
        : kind === "finishes"
        ? "finishing 2 s after SIGTERM"
        : "ended by SIGTERM"
    }`,
    jobs: 1,
    body: STEPS[kind],
    // The step's bound: STOP_TIMEOUT_S - GIVE_BACK_MAX_TIME_S = 4 s.
    env: { STOP_TIMEOUT_S: "6", GIVE_BACK_MAX_TIME_S: "2" },
    timeoutStopS: 8,
    before: async ({ dir }) => {
      await until(() => Deno.stat(`${dir}/started`).then(() => true, () => undefined), 20_000);
      return true;
    },
  });
}

/** Five SEO jobs claimed, the worker answering every give-back 2.5 s late, TimeoutStopSec 8. */
export function seoSlowStop(stage: HostStage, shell: Shell) {
  return scenario(stage, shell, {
    queue: "seo",
    scenario: "SEO stop, slow worker",
    jobs: 5,
    body: STEPS.dies,
    env: { STOP_TIMEOUT_S: "6", GIVE_BACK_MAX_TIME_S: "3" },
    timeoutStopS: 8,
    before: async ({ proxy, dir }) => {
      await until(() => Deno.stat(`${dir}/started`).then(() => true, () => undefined), 20_000);
      proxy.rule({ match: /give-back$/, delayMs: 2500 });
      return true;
    },
  });
}
