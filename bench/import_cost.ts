/**
 * What each part of the worker costs in memory just by being loaded: imports
 * `main.ts`'s modules one group at a time, in `main.ts`'s order, in this one process, and after
 * each group runs a full GC and reads VmRSS and V8's heap. A group's cost is what it adds to what
 * came before it (a package that an earlier group already loaded costs the later one nothing).
 *
 * ```sh
 * deno run -A --v8-flags=--max-semi-space-size=4 bench/import_cost.ts [--rounds 3]
 * ```
 *
 * Figures are MB (10^6 bytes), medians of the rounds (each round a fresh process).
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";

/**
 * The groups, in `main.ts`'s order: a label and the modules it imports. The parts loaded on first
 * use come last, so each one's figure is what loading it at startup would cost.
 */
export const GROUPS: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["Node compatibility (node:v8, vm, timers, path, process)", [
    "node:v8",
    "node:vm",
    "node:timers/promises",
    "node:path",
    "node:process",
  ]],
  ["postgres.js + lib/db.ts (the first npm package)", ["postgres", "../lib/db.ts"]],
  ["zod + lib/config.ts", ["zod", "../lib/config.ts"]],
  ["pino + lib/log.ts", ["pino", "../lib/log.ts"]],
  ["lifecycle, events, idle_gc, wake, listener, lock, consumer", [
    "../lib/lifecycle.ts",
    "../lib/events.ts",
    "../lib/idle_gc.ts",
    "../lib/wake.ts",
    "../lib/listener.ts",
    "../lib/lock.ts",
    "../lib/consumer.ts",
    "../lib/queue.ts",
    "../lib/queue_setup.ts",
  ]],
  ["Hono (core, body-limit, streaming, bearer)", [
    "hono",
    "hono/body-limit",
    "hono/http-exception",
    "hono/method-not-allowed",
    "hono/streaming",
    "hono/bearer-auth",
  ]],
  ["lib/http/openapi.ts (+ @hono/zod-validator)", ["../lib/http/openapi.ts"]],
  ["lib/http/api.ts", ["../lib/http/api.ts"]],
  ["lib/admin/stats_cache.ts", ["../lib/admin/stats_cache.ts"]],
  ["prom-client", ["prom-client"]],
  ["lib/admin/metrics.ts", ["../lib/admin/metrics.ts"]],
  ["queues/ingestion/mod.ts + routes (books/)", [
    "../queues/ingestion/mod.ts",
    "../queues/ingestion/routes.ts",
    "../queues/ingestion/setup.ts",
  ]],
  ["queues/user_ingestion/, lib/http/multipart.ts", [
    "../queues/user_ingestion/mod.ts",
    "../queues/user_ingestion/routes.ts",
    "../queues/user_ingestion/setup.ts",
  ]],
  ["queues/enrichment/", [
    "../queues/enrichment/mod.ts",
    "../queues/enrichment/routes.ts",
    "../queues/enrichment/setup.ts",
  ]],
  ["queues/ssg/", ["../queues/ssg/mod.ts", "../queues/ssg/routes.ts", "../queues/ssg/setup.ts"]],
  ["auto-publish, SEO, channel, drain, indexnow", [
    "../queues/auto_publish/mod.ts",
    "../queues/auto_publish/routes.ts",
    "../queues/seo_backfill/mod.ts",
    "../queues/seo_backfill/routes.ts",
    "../queues/auto_publish/setup.ts",
    "../queues/seo_backfill/setup.ts",
    "../lib/channel.ts",
    "../lib/drain.ts",
    "../queues/auto_publish/_indexnow.ts",
  ]],
  ["queue views", [
    "../queues/ingestion/view.ts",
    "../queues/user_ingestion/view.ts",
    "../queues/enrichment/view.ts",
    "../queues/ssg/view.ts",
    "../queues/auto_publish/view.ts",
    "../queues/seo_backfill/view.ts",
  ]],
  ["on first use: busboy (an upload)", ["busboy"]],
  ["on first use: lib/http/openapi_document.ts", ["../lib/http/openapi_document.ts"]],
  ["on first use: /admin (lib/admin/*.tsx, Hono JSX, hono-rate-limiter)", [
    "../lib/admin/dashboard.tsx",
  ]],
];

interface Step {
  rss: number;
  anon: number;
  heap: number;
}

async function step(gc: () => void): Promise<Step> {
  gc();
  await sleep(300);
  gc();
  const status = Deno.readTextFileSync("/proc/self/status");
  return {
    rss: Number(/VmRSS:\s+(\d+)/.exec(status)![1]) * 1024,
    anon: Number(/RssAnon:\s+(\d+)/.exec(status)![1]) * 1024,
    heap: Deno.memoryUsage().heapUsed,
  };
}

// One round, in this process: print each step's reading as a JSON line.
if (Deno.args[0] === "--child") {
  const { loadGc } = await import("../lib/idle_gc.ts");
  const gc = loadGc()!;
  const steps = [await step(gc)];
  for (const [, modules] of GROUPS) {
    for (const m of modules) await import(m.startsWith(".") ? new URL(m, import.meta.url).href : m);
    steps.push(await step(gc));
  }
  console.log(JSON.stringify(steps));
  Deno.exit(0);
}

const rounds = Number(Deno.args[Deno.args.indexOf("--rounds") + 1] || "3");
const runs: Step[][] = [];
for (let i = 0; i < rounds; i++) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--max-semi-space-size=4", import.meta.filename!, "--child"],
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error("An import-cost round failed");
  runs.push(JSON.parse(new TextDecoder().decode(out.stdout)));
}
const median = (xs: number[]): number => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)];
const mb = (bytes: number): string => (bytes / 1e6).toFixed(1);
const at = (i: number, f: (s: Step) => number) => median(runs.map((r) => f(r[i])));
const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
console.log(`memory added by loading, MB, after a full GC (median of ${rounds}; load ${load})`);
console.log("group | RSS added | of which anonymous | V8 heap added | RSS total");
const row = (label: string, i: number, added: (f: (s: Step) => number) => number) =>
  console.log(
    [
      label,
      ...[(s: Step) => s.rss, (s: Step) => s.anon, (s: Step) => s.heap].map((f) => mb(added(f))),
      mb(at(i, (s) => s.rss)),
    ].join(" | "),
  );
row("runtime (deno, this script, idle_gc)", 0, (f) => at(0, f));
for (const [i, [label]] of GROUPS.entries()) {
  row(label, i + 1, (f) => median(runs.map((r) => f(r[i + 1]) - f(r[i]))));
}
