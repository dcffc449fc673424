/**
 * The Docker image (issue 9, review: "The Docker image runs as root and has no HEALTHCHECK"),
 * checked from the Dockerfile itself, since no Docker daemon runs here: it copies every local
 * module `main.ts` loads (from `deno info`, so a new folder cannot be forgotten), runs as an
 * unprivileged user, and its HEALTHCHECK probes `/readyz`.
 */
import assert from "node:assert/strict";
import { mainModuleGraph } from "../_module_graph.ts";

const ROOT = new URL("../../", import.meta.url);

async function dockerfile(): Promise<string[]> {
  const text = await Deno.readTextFile(new URL("Dockerfile", ROOT));
  // Join continuation lines, drop comments.
  return text.replace(/\\\n/g, " ").split("\n").filter((l) => l.trim() && !l.startsWith("#"));
}

Deno.test("Dockerfile copies every local module main.ts loads", async () => {
  const lines = await dockerfile();
  const copied = lines.filter((l) => /^COPY\s/.test(l)).flatMap((l) =>
    l.trim().split(/\s+/).slice(1, -1).map((src) => src.replace(/^\.\//, "").replace(/\/$/, ""))
  );
  const { modules } = await mainModuleGraph();
  const local = modules.map((m) => m.specifier).filter((s) => s.startsWith(ROOT.href))
    .map((s) => s.slice(ROOT.href.length));
  // Read at run time, not imported: the migrations.
  local.push("sql/001_ingestion.sql");
  assert.ok(local.includes("lib/consumer.ts"), `deno info listed: ${local}`);
  const missing = local.filter((path) =>
    !copied.some((src) => path === src || path.startsWith(`${src}/`))
  );
  assert.deepEqual(missing, [], `not copied into the image (COPY: ${copied})`);
});

Deno.test("Dockerfile runs the worker unprivileged and probes /readyz", async () => {
  const lines = await dockerfile();
  const user = lines.filter((l) => /^USER\s/.test(l)).map((l) => l.split(/\s+/)[1]);
  const entry = lines.findIndex((l) => /^ENTRYPOINT\s/.test(l));
  const lastUser = lines.findLastIndex((l) => /^USER\s/.test(l));
  assert.ok(user.length > 0 && lastUser < entry, "a USER line before ENTRYPOINT");
  assert.ok(!["root", "0", "0:0"].includes(user.at(-1)!), `runs as ${user.at(-1)}`);
  const health = lines.filter((l) => /^HEALTHCHECK\s/.test(l));
  assert.equal(health.length, 1);
  assert.match(health[0], /\/readyz\b/);
  assert.doesNotMatch(health[0], /\/healthz\b/);
});

Deno.test("Dockerfile starts the worker with the start task's command line (its V8 flags too)", async () => {
  const lines = await dockerfile();
  const entry = lines.find((l) => /^ENTRYPOINT\s/.test(l));
  assert.ok(entry, "an ENTRYPOINT line");
  const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT)));
  // The bench spawns each checkout's worker with this same command line (bench/_start_command.ts).
  assert.deepEqual(
    JSON.parse(entry.replace(/^ENTRYPOINT\s+/, "")),
    String(config.tasks.start).trim().split(/\s+/),
  );
});
