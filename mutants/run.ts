/**
 * `deno task mutants`: the mutation check. Every rule the queues rely on (a fence, a
 * status transition, a wake source, a channel mode, …) is broken on purpose, one at a time, and the
 * test files named for it must fail; a mutation they do not catch is a rule no test guards.
 *
 * The mutations live in `mutants/<area>.json`, each a JSON array of
 * `{ id, file, find, replace, rule, source, tests }`: `find` must occur exactly once in `file`
 * (else the row is `not-applicable`, counted as survived, so a stale entry is noticed), and
 * `tests` are the smallest test files that catch it. For each mutation a scratch copy of the
 * repository is made (the files git knows, tracked or new; `node_modules` symlinked, `.data/` left
 * out), the one replacement applied, and `deno test -A --no-check <tests>` run there — without the
 * type check, so only a failing test can kill a mutation, and `--fail-fast`, so the first failure
 * ends the run. All runs share one PostgreSQL:
 * `DATABASE_URL` when set, else one embedded server started here (tests/_db.ts gives each test
 * file its own schema, so runs in parallel never meet).
 *
 * Prints one row per mutation (`killed`, `timeout`, `survived` or `not-applicable`, the time, the
 * first failing test and its error; each run's whole output goes to `.data/mutants/<id>.log`), then one line `mutants: N killed, M survived`; exits 1 when any survived.
 * A run past `--timeout` is killed with its whole process group and counts as killed, printed as
 * `timeout`: a hang means a test wait without a deadline, which is a defect to fix.
 *
 * A mutation with `catches` (the test that caught it last time) runs that one test first; only if
 * it passes are the named files run whole, so the verdict is the same and the run is shorter.
 *
 * Usage: `deno task mutants [--filter <id substring>]… [--concurrency 2] [--timeout 300] [--list]
 * [--record]` (`--filter` may repeat: a mutation matching any runs; `--timeout` in seconds per
 * test run; `--list` prints each mutation's file and test files and runs nothing; `--record`
 * writes each killed mutation's catching test back into its `mutants/<area>.json` as `catches`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { startEmbedded } from "../lib/embedded.ts";
import { freePort } from "../tests/_fs.ts";

/** One rule-breaking mutation, as written in `mutants/<area>.json`. */
export const Mutation = z.strictObject({
  /** Unique kebab-case id, e.g. `settle-fence-drops-claimed-by`. */
  id: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, "expected a kebab-case id"),
  /** Repository-relative path of the file to mutate. */
  file: z.string().min(1),
  /** Exact text that must occur exactly once in `file`. */
  find: z.string().min(1),
  /** What replaces it. */
  replace: z.string(),
  /** The rule the replacement breaks. */
  rule: z.string().min(1),
  /** Where the rule is stated: a decision record, a docs page, a repository file or `owner/repo#N`. */
  source: z.string().min(1),
  /** Repository-relative test files, at least one of which must fail. */
  tests: z.array(z.string().min(1)).min(1),
  /**
   * Name of the test that caught it on a recorded run (`--record`): run first and alone; only
   * when it passes are the whole `tests` files run. A shortcut, never a weaker check.
   */
  catches: z.string().min(1).optional(),
});
/** A parsed mutation. */
export type Mutation = z.infer<typeof Mutation>;

type Outcome = "killed" | "timeout" | "survived" | "not-applicable";

interface Result {
  mutation: Mutation;
  outcome: Outcome;
  ms: number;
  /** The catching test, or why the row has none. */
  detail: string;
  /** The name of the first failing test, when one failed. */
  catcher?: string;
}

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const decoder = new TextDecoder();

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    filter: { type: "string", multiple: true },
    concurrency: { type: "string", default: "2" },
    timeout: { type: "string", default: "300" },
    list: { type: "boolean", default: false },
    record: { type: "boolean", default: false },
  },
});
const concurrency = Number(flags.concurrency);
const timeoutS = Number(flags.timeout);
if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
  usageError(
    `Cannot parse --concurrency: expected a positive integer, received "${flags.concurrency}"`,
  );
}
if (!(timeoutS > 0)) {
  usageError(
    `Cannot parse --timeout: expected a positive number of seconds, received "${flags.timeout}"`,
  );
}

const filters = flags.filter ?? [""];
const mutations = (await readMutations()).filter((m) => filters.some((f) => m.id.includes(f)));
if (mutations.length === 0) usageError(`No mutation matches --filter ${filters.join(", ")}`);

if (flags.list) {
  for (const m of mutations) console.log(`${m.id}\t${m.file}\t${m.tests.join(" ")}`);
  Deno.exit(0);
}

const running = new Set<Deno.ChildProcess>();
const scratchDirs = new Set<string>();
const env: Record<string, string> = { NO_COLOR: "1" };
let stopDb = (): Promise<void> => Promise.resolve();
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  Deno.addSignalListener(signal, async () => {
    for (const child of running) killGroup(child);
    for (const dir of scratchDirs) await Deno.remove(dir, { recursive: true }).catch(() => {});
    await stopDb();
    Deno.exit(130);
  });
}

const url = Deno.env.get("DATABASE_URL");
if (url) {
  env.DATABASE_URL = url;
} else {
  const port = freePort();
  const pg = await startEmbedded({
    dir: `${root}/.data/mutants-pg-${port}`,
    port,
    persistent: false,
  });
  console.log(`embedded PostgreSQL for mutants on 127.0.0.1:${port}`);
  env.DATABASE_URL = pg.url;
  stopDb = pg.stop;
}

const files = await repositoryFiles();
// Each run's test output, kept until the next run: the row shows the first failure only.
const logDir = join(root, ".data", "mutants");
await Deno.remove(logDir, { recursive: true }).catch(() => {});
await Deno.mkdir(logDir, { recursive: true });
if (!(await exists(join(root, "node_modules")))) await install();
console.log(
  `${mutations.length} mutations, ${concurrency} at a time, ${timeoutS} s timeout each`,
);
const startedAt = performance.now();
const results: Result[] = [];
const queue = [...mutations];
await Promise.all(
  Array.from({ length: Math.min(concurrency, queue.length) }, async () => {
    for (let m = queue.shift(); m; m = queue.shift()) {
      const result = await runMutation(m);
      results.push(result);
      printRow(result);
    }
  }),
);
await stopDb();
if (flags.record) await recordCatchers(results);

const killed = results.filter((r) => r.outcome === "killed" || r.outcome === "timeout").length;
const timeouts = results.filter((r) => r.outcome === "timeout").length;
const notApplicable = results.filter((r) => r.outcome === "not-applicable").length;
const survived = results.length - killed;
const notes = [
  timeouts ? `${timeouts} killed only by the timeout: give those waits a deadline` : "",
  notApplicable ? `${notApplicable} of the survivors not applicable: fix their find text` : "",
].filter(Boolean);
console.log(
  `elapsed ${((performance.now() - startedAt) / 1000).toFixed(1)} s; test output in ${logDir}/`,
);
console.log(
  `mutants: ${killed} killed, ${survived} survived${notes.length ? ` (${notes.join("; ")})` : ""}`,
);
Deno.exit(survived > 0 ? 1 : 0);

// --- helpers ---

function usageError(message: string): never {
  console.error(message);
  Deno.exit(2);
}

/** Every `mutants/*.json`, validated, ids unique; a bad file stops the run naming it (exit 2). */
async function readMutations(): Promise<Mutation[]> {
  const names = [...Deno.readDirSync(join(root, "mutants"))]
    .filter((e) => e.isFile && e.name.endsWith(".json"))
    .map((e) => e.name)
    .sort();
  const all: Mutation[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const parsed = z.array(Mutation).safeParse(
      JSON.parse(await Deno.readTextFile(join(root, "mutants", name))),
    );
    if (!parsed.success) {
      usageError(`Cannot read mutants/${name}: ${z.prettifyError(parsed.error)}`);
    }
    for (const m of parsed.data) {
      if (seen.has(m.id)) usageError(`Cannot read mutants/${name}: duplicate id "${m.id}"`);
      seen.add(m.id);
      all.push(m);
    }
  }
  return all;
}

/** The files git knows (tracked, or new and not ignored) that exist in the working tree. */
async function repositoryFiles(): Promise<string[]> {
  const out = await new Deno.Command("git", {
    args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    cwd: root,
    stdout: "piped",
  }).output();
  if (!out.success) usageError("Cannot list the repository's files: git ls-files failed");
  const paths = [...new Set(decoder.decode(out.stdout).split("\0").filter(Boolean))];
  const present: string[] = [];
  for (const path of paths) {
    if (!path.startsWith(".data/") && await exists(join(root, path))) present.push(path);
  }
  return present;
}

async function install(): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["install"], cwd: root }).output();
  if (!out.success) usageError("Cannot install the npm packages: deno install failed");
}

async function runMutation(m: Mutation): Promise<Result> {
  const t0 = performance.now();
  const done = (outcome: Outcome, detail: string): Result => ({
    mutation: m,
    outcome,
    ms: performance.now() - t0,
    detail,
  });
  const source = await Deno.readTextFile(join(root, m.file)).catch(() => null);
  if (source === null) return done("not-applicable", `${m.file} does not exist`);
  const occurrences = source.split(m.find).length - 1;
  if (occurrences !== 1) {
    return done("not-applicable", `find text occurs ${occurrences} times in ${m.file}`);
  }
  const missing = m.tests.filter((t) => !files.includes(t));
  if (missing.length > 0) return done("not-applicable", `no test file ${missing.join(", ")}`);

  const dir = await Deno.makeTempDir({ prefix: `textstack-mutant-${m.id}-` });
  scratchDirs.add(dir);
  try {
    for (const path of files) {
      await Deno.mkdir(join(dir, dirname(path)), { recursive: true });
      await Deno.copyFile(join(root, path), join(dir, path));
    }
    await Deno.symlink(join(root, "node_modules"), join(dir, "node_modules"));
    await Deno.writeTextFile(join(dir, m.file), source.replace(m.find, () => m.replace));
    if (m.catches) {
      const quick = await runTests(dir, m.tests, m.catches);
      if (!quick.success && !quick.timedOut) {
        await Deno.writeTextFile(join(logDir, `${m.id}.log`), quick.output);
        return { ...done("killed", firstFailure(quick.output)), catcher: failedTest(quick.output) };
      }
    }
    const { output, timedOut, success } = await runTests(dir, m.tests);
    await Deno.writeTextFile(join(logDir, `${m.id}.log`), output);
    if (timedOut) return done("timeout", `no verdict in ${timeoutS} s; ${firstFailure(output)}`);
    if (success) return done("survived", "every named test passed");
    return { ...done("killed", firstFailure(output)), catcher: failedTest(output) };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    scratchDirs.delete(dir);
  }
}

/**
 * Run the test files in `dir` (only the tests whose name contains `filter`, when given), in a
 * process group of their own so a timeout kills it whole.
 */
async function runTests(
  dir: string,
  tests: string[],
  filter?: string,
): Promise<{ output: string; timedOut: boolean; success: boolean }> {
  const only = filter === undefined ? [] : ["--filter", filter];
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--no-check", "--fail-fast", ...only, ...tests],
    cwd: dir,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    detached: true,
  }).spawn();
  running.add(child);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child);
  }, timeoutS * 1000);
  try {
    const [stdout, stderr, status] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.status,
    ]);
    return { output: `${stdout}\n${stderr}`, timedOut, success: status.success };
  } finally {
    clearTimeout(timer);
    running.delete(child);
  }
}

function killGroup(child: Deno.ChildProcess): void {
  try {
    Deno.kill(-child.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/**
 * The first test `deno test` reported as FAILED with the first line of its error, so a reader can
 * tell the intended catch from a failure for another reason; or what else ended the run.
 */
function firstFailure(output: string): string {
  const failed = /^\s*(.+?) \.\.\. FAILED\b/m.exec(output);
  const errors = output.indexOf(" ERRORS ");
  const error = /^error: (.+)$/m.exec(errors >= 0 ? output.slice(errors) : output);
  const why = error ? error[1].trim().slice(0, 160) : "";
  if (failed) return why ? `${failed[1]} — ${why}` : failed[1];
  return why ? `(no test failed: ${why})` : "(no test reported as failed)";
}

/** The name of the first test `deno test` reported as FAILED, if any. */
function failedTest(output: string): string | undefined {
  return /^\s*(.+?) \.\.\. FAILED\b/m.exec(output)?.[1];
}

/** `--record`: write each killed mutation's catching test into its file as `catches`. */
async function recordCatchers(results: Result[]): Promise<void> {
  const catchers = new Map(
    results.filter((r) => r.outcome === "killed" && r.catcher).map((r) => [
      r.mutation.id,
      r.catcher!,
    ]),
  );
  for (const entry of Deno.readDirSync(join(root, "mutants"))) {
    if (!entry.isFile || !entry.name.endsWith(".json")) continue;
    const path = join(root, "mutants", entry.name);
    const list = JSON.parse(await Deno.readTextFile(path)) as Mutation[];
    let changed = false;
    for (const m of list) {
      const name = catchers.get(m.id);
      if (name && m.catches !== name) (m.catches = name, changed = true);
    }
    if (changed) await Deno.writeTextFile(path, `${JSON.stringify(list, null, 2)}\n`);
  }
}

function printRow(r: Result): void {
  const seconds = `${(r.ms / 1000).toFixed(1)} s`.padStart(7);
  console.log(`${r.outcome.padEnd(14)} ${r.mutation.id.padEnd(44)} ${seconds}  ${r.detail}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}
