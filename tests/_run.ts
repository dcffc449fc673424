/**
 * `deno task test`: runs `deno test` against `DATABASE_URL` when set, else against a throwaway
 * embedded PostgreSQL started here and stopped (and deleted) when the tests end.
 *
 * Extra arguments are passed to `deno test` (e.g. a file or `--filter`); `--run <script> …` runs
 * `deno run -A <script> …` against the same server instead.
 *
 * @module
 */
import { startEmbedded } from "../lib/embedded.ts";
import { freePort } from "./_fs.ts";

const env: Record<string, string> = {};
let stop = (): Promise<void> => Promise.resolve();
if (!Deno.env.get("DATABASE_URL")) {
  const port = freePort();
  const pg = await startEmbedded({ dir: `.data/test-pg-${port}`, port, persistent: false });
  console.log(`embedded PostgreSQL for tests on 127.0.0.1:${port}`);
  env.DATABASE_URL = pg.url;
  stop = pg.stop;
}

/**
 * Files outside tests/process that watch this process's own children or threads
 * (`/proc/<Deno.pid>`): under `--parallel` every file runs in the one `deno test` process, so they
 * would count another file's children (an extraction child, a spawned worker) as their own.
 */
const WHOLE_PROCESS = ["tests/books/extract_test.ts", "tests/books/extract_worker_test.ts"];

/**
 * What runs: `--run <script> …` a script against the same server (`deno task schema`); extra
 * arguments one `deno test`; none the whole suite in two rounds — the files that need only their
 * own schema (every folder of tests/ but tests/process) with `--parallel`, then tests/process, whose
 * workers and signals are timed, and the {@linkcode WHOLE_PROCESS} files, one file at a time — and
 * one summary line for both.
 */
const rounds: string[][] = Deno.args[0] === "--run"
  ? [["run", "-A", ...Deno.args.slice(1)]]
  : Deno.args.length > 0
  ? [["test", "-A", ...Deno.args]]
  : [
    ["test", "-A", "--parallel", ...ownSchemaFiles()],
    ["test", "-A", ...WHOLE_PROCESS, "tests/process/"],
  ];

/**
 * Every test file of tests/ but tests/process, fixtures and the {@linkcode WHOLE_PROCESS} files:
 * the files that need only a schema, named one by one (`deno test --ignore` next to folder
 * arguments is not applied reliably).
 */
function ownSchemaFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(dir)) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (/_test\.tsx?$/.test(entry.name) && !WHOLE_PROCESS.includes(path)) found.push(path);
    }
  };
  for (const entry of Deno.readDirSync("tests")) {
    if (entry.isDirectory && !["process", "fixtures"].includes(entry.name)) {
      walk(`tests/${entry.name}`);
    }
  }
  return found.sort();
}

let child: Deno.ChildProcess | undefined;
// A Ctrl-C reaches the child through the process group; SIGTERM or SIGHUP (a CI timeout, an
// IDE's stop button, a closed terminal) is passed on. Either way we wait for the child, then
// stop the throwaway server, which runs in its own session and would otherwise outlive us.
let stopping = false;
Deno.addSignalListener("SIGINT", () => (stopping = true));
for (const signal of ["SIGTERM", "SIGHUP"] as const) {
  Deno.addSignalListener(signal, () => {
    stopping = true;
    child?.kill(signal);
  });
}

// `ok | 12 passed | 0 failed | 1 ignored (3s)`: deno test's summary line, counted over the rounds.
const SUMMARY =
  // deno-lint-ignore no-control-regex -- the summary line carries ANSI colour codes (ESC).
  /^(?:\x1b\[[0-9;]*m)*(ok|FAILED)(?:\x1b\[[0-9;]*m)* \| (\d+) passed.*?\| (\d+) failed(?:.*?\| (\d+) ignored)?/;
const totals = { passed: 0, failed: 0, ignored: 0, summaries: 0 };
let code = 0;
const started = performance.now();
for (const args of rounds) {
  if (stopping) break;
  child = new Deno.Command(Deno.execPath(), { args, env, stdin: "null", stdout: "piped" }).spawn();
  let buffered = "";
  for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
    await Deno.stdout.write(new TextEncoder().encode(chunk));
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const m = SUMMARY.exec(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      if (!m) continue;
      totals.passed += Number(m[2]);
      totals.failed += Number(m[3]);
      totals.ignored += Number(m[4] ?? 0);
      totals.summaries++;
    }
  }
  const status = await child.status;
  if (!status.success) code = status.code || 1;
}
if (rounds.length > 1 && totals.summaries > 0) {
  const s = Math.round((performance.now() - started) / 1000);
  console.log(
    `\n${code === 0 ? "ok" : "FAILED"} | ${totals.passed} passed | ${totals.failed} failed | ` +
      `${totals.ignored} ignored (${s}s, ${rounds.length} rounds)`,
  );
}
await stop();
Deno.exit(code);
