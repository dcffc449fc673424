/**
 * What each part of the worker costs in memory just by being loaded (issue 11, memory): imports
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
  ]],
  ["Hono (core, body-limit, streaming, bearer)", [
    "hono",
    "hono/body-limit",
    "hono/http-exception",
    "hono/method-not-allowed",
    "hono/streaming",
    "hono/bearer-auth",
  ]],
  ["lib/http/openapi.ts (+ @hono/zod-validator)", ["../lib/openapi.ts"]],
  ["lib/http/api.ts", ["../lib/api.ts"]],
  ["lib/admin/stats_cache.ts", ["../lib/stats_cache.ts"]],
  ["prom-client", ["prom-client"]],
  ["lib/admin/metrics.ts", ["../lib/metrics.ts"]],
  ["queues/ingestion/mod.ts + routes (books/)", [
    "../queues/ingestion.ts",
    "../queues/ingestion_routes.ts",
  ]],
  ["queues/user_ingestion*.ts, lib/http/multipart.ts", [
    "../queues/user_ingestion.ts",
    "../queues/user_ingestion_routes.ts",
  ]],
  ["queues/enrichment*.ts", ["../queues/enrichment.ts", "../queues/enrichment_routes.ts"]],
  ["queues/ssg*.ts", ["../queues/ssg.ts", "../queues/ssg_routes.ts"]],
  ["auto-publish, SEO, channel, drain, indexnow", [
    "../queues/auto_publish.ts",
    "../queues/auto_publish_routes.ts",
    "../queues/seo_backfill.ts",
    "../queues/seo_backfill_routes.ts",
    "../lib/channel.ts",
    "../lib/drain.ts",
    "../indexnow/ping.ts",
  ]],
  ["queue views", [
    "../queues/ingestion_view.ts",
    "../queues/user_ingestion_view.ts",
    "../queues/enrichment_view.ts",
    "../queues/ssg_view.ts",
    "../queues/auto_publish_view.ts",
    "../queues/seo_backfill_view.ts",
  ]],
  ["on first use: busboy (an upload)", ["busboy"]],
  ["on first use: lib/http/openapi_document.ts", ["../lib/openapi_document.ts"]],
  ["on first use: /admin (lib/admin*.tsx, Hono JSX, hono-rate-limiter)", ["../lib/admin.tsx"]],
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
