/**
 * `deno run -A bench/http_servers.ts`: the two ways to serve the Hono app, side by side —
 * `Deno.serve` and `node:http` through `@hono/node-server` as lib/http/server.ts does (its
 * timeouts, cap and accept watchdog). Each server runs in its own process under `ulimit -n 256`
 * with a one-route app (`GET /ping` → `{ ok: true }`); this script then measures, bounded in time:
 *
 * - latency and throughput: 16 keep-alive clients calling `/ping` for 5 s (requests/s, p50, p99);
 * - floods: 2 × 500 connections of each kind (idle, partial headers, slow body) held 4 s, with
 *   2 s header and idle timeouts: connections closed or refused, peak fds and RSS of the server,
 *   whether it still answers after, whether it is still alive.
 *
 * Prints one Markdown table. Loopback only.
 *
 * @module
 */
import { Hono } from "hono";
import { flood, type FloodKind, processUsage } from "../tests/_flood.ts";

const OPEN_FILES = 256;

if (Deno.args[0] === "--serve") {
  const app = new Hono();
  app.get("/ping", (c) => c.json({ ok: true }));
  app.post("/internal/ingestion/jobs", async (c) => c.json({ read: (await c.req.text()).length }));
  const ready = (port: number) => console.log(JSON.stringify({ port }));
  if (Deno.args[1] === "deno") {
    Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: ({ port }) => ready(port) }, app.fetch);
  } else {
    const { startServer, connectionCap, openFileLimit } = await import("../lib/http/server.ts");
    const { createLogger } = await import("../lib/log.ts");
    const server = await startServer({
      hostname: "127.0.0.1",
      port: 0,
      fetch: app.fetch,
      log: createLogger("silent"),
      headersTimeoutMs: 2000,
      idleTimeoutMs: 2000,
      maxConnections: connectionCap(1024, openFileLimit()),
    });
    ready(server.addr.port);
  }
} else {
  const rows: string[] = [];
  for (const kind of ["deno", "node"] as const) rows.push(...(await measure(kind)));
  console.log(
    "| server | measure | value |\n| --- | --- | --- |\n" + rows.join("\n"),
  );
}

async function spawnServer(kind: "deno" | "node") {
  const child = new Deno.Command("/bin/sh", {
    args: [
      "-c",
      `ulimit -n ${OPEN_FILES} && exec "$0" "$@"`,
      Deno.execPath(),
      "run",
      "-A",
      new URL(import.meta.url).pathname,
      "--serve",
      kind,
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const { port } = JSON.parse((await reader.read()).value!.split("\n")[0]);
  const alive = async () => {
    const status = await Promise.race([
      child.status.then(() => "exited"),
      new Promise((r) => setTimeout(() => r("running"), 50)),
    ]);
    return status === "running";
  };
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch {
      // exited already
    }
    await child.status;
  };
  return { child, port, base: `http://127.0.0.1:${port}`, alive, stop };
}

// A fresh server for the latency run and for each flood: one flood's damage is not the next's.
async function measure(kind: "deno" | "node"): Promise<string[]> {
  const name = kind === "deno" ? "Deno.serve" : "node:http (lib/http/server.ts)";
  const out: string[] = [];
  {
    const { base, stop } = await spawnServer(kind);
    const latencies: number[] = [];
    const until = performance.now() + 5000;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        const res = await fetch(`${base}/ping`);
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
      }
    }));
    latencies.sort((a, b) => a - b);
    const pct = (p: number) => latencies[Math.floor(latencies.length * p)].toFixed(2);
    out.push(
      `| ${name} | requests/s (16 keep-alive clients, 5 s) | ${Math.round(latencies.length / 5)} |`,
    );
    out.push(`| ${name} | latency p50 / p99 (ms) | ${pct(0.5)} / ${pct(0.99)} |`);
    await stop();
  }
  for (const flooding of ["idle", "partial", "slowbody"] as FloodKind[]) {
    const { child, port, base, alive, stop } = await spawnServer(kind);
    let fds = 0;
    let rss = 0;
    const results = await Promise.all([
      flood(port, flooding, 500, 4000, "", async () => {
        for (let i = 0; i < 12; i++) {
          await new Promise((r) => setTimeout(r, 300));
          try {
            const usage = processUsage(child.pid);
            fds = Math.max(fds, usage.fds);
            rss = Math.max(rss, usage.rssMiB);
          } catch {
            // exited
          }
        }
      }),
      flood(port, flooding, 500, 4000),
    ]);
    let answers = false;
    for (let i = 0; i < 20 && !answers && (await alive()); i++) {
      answers = await fetch(`${base}/ping`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => (r.body?.cancel(), r.ok),
        () => false,
      );
      if (!answers) await new Promise((r) => setTimeout(r, 250));
    }
    const closed = results.reduce((n, r) => n + r.closedByServer + r.refused, 0);
    const last = Math.max(...results.map((r) => r.lastCloseMs));
    out.push(
      `| ${name} | ${flooding} × 1000: closed or refused, last close (ms), peak fds, peak RSS (MiB), answers after, alive | ${closed}, ${last}, ${fds}, ${rss}, ${
        answers ? "yes" : "no"
      }, ${(await alive()) ? "yes" : "no"} |`,
    );
    await stop();
  }
  return out;
}
