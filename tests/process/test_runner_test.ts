/**
 * tests/_run.ts, `deno task test` with no arguments, run as a process on a scratch `tests/` tree:
 * the files of every folder but tests/process (and tests/fixtures) in one `--parallel` round,
 * then tests/process and the files that watch their own process (`WHOLE_PROCESS`) one file at a
 * time, and one summary line that adds up both rounds' counts
 * and fails when either round failed. Each probe test records when it ran, so the order and the
 * overlaps are read from the clock, not from the output.
 *
 * @module
 */
import assert from "node:assert/strict";

const RUN = new URL("../_run.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const HOLD_MS = 800;

/** A test file whose one test holds `HOLD_MS` and appends `[file, start, end]` to the log. */
function probe(file: string, extra = ""): string {
  return `Deno.test(${JSON.stringify(`${file} holds`)}, async () => {
  const start = Date.now();
  await new Promise((r) => setTimeout(r, ${HOLD_MS}));
  await Deno.writeTextFile(Deno.env.get("PROBE_LOG")!, JSON.stringify([${
    JSON.stringify(file)
  }, start, Date.now()]) + "\\n", { append: true });
});
${extra}`;
}

const PASS = `Deno.test("passes", () => {});\n`;
const IGNORED = `Deno.test({ name: "ignored", ignore: true, fn() {} });\n`;

async function runSuite(failInFirstRound: boolean) {
  const dir = await Deno.makeTempDir({ prefix: "textstack-run-" });
  try {
    const files: Record<string, string> = {
      "tests/lib/a_test.ts": probe("a", PASS + IGNORED),
      "tests/site/b_test.ts": probe(
        "b",
        failInFirstRound ? `Deno.test("fails", () => { throw new Error("no"); });\n` : PASS,
      ),
      "tests/books/extract_test.ts": probe("x"),
      "tests/books/extract_worker_test.ts": probe("w"),
      "tests/books/other_test.ts": probe("o"),
      "tests/process/p_test.ts": probe("p", IGNORED),
      "tests/process/q_test.ts": probe("q", PASS),
      "tests/fixtures/f_test.ts": probe("fixture"),
    };
    for (const [path, text] of Object.entries(files)) {
      await Deno.mkdir(`${dir}/${path.slice(0, path.lastIndexOf("/"))}`, { recursive: true });
      await Deno.writeTextFile(`${dir}/${path}`, text);
    }
    const log = `${dir}/probe.log`;
    await Deno.writeTextFile(log, "");
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--config", CONFIG, RUN],
      cwd: dir,
      env: {
        NO_COLOR: "1",
        PROBE_LOG: log,
        DENO_JOBS: "2",
        DATABASE_URL: Deno.env.get("DATABASE_URL") ?? "postgres://unused@127.0.0.1:1/none",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    const runs = (await Deno.readTextFile(log)).trim().split("\n").filter(Boolean).map((line) => {
      const [file, start, end] = JSON.parse(line) as [string, number, number];
      return { file, start, end };
    });
    const summary = stdout.trim().split("\n").at(-1) ?? "";
    return { code: out.code, stdout, runs, summary };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const overlap = (x: { start: number; end: number }, y: { start: number; end: number }) =>
  x.start < y.end && y.start < x.end;

Deno.test(
  "deno task test: every folder but tests/process in one parallel round, then tests/process one file at a time; one summary line adds up both rounds",
  async () => {
    const { code, stdout, runs, summary } = await runSuite(false);
    assert.equal(code, 0, stdout);
    assert.deepEqual(
      runs.map((r) => r.file).sort(),
      ["a", "b", "o", "p", "q", "w", "x"],
      "each file once; tests/fixtures never runs",
    );
    const { a, b, o, p, q, w, x } = Object.fromEntries(runs.map((r) => [r.file, r]));
    assert.ok(
      overlap(a, b) || overlap(a, o) || overlap(b, o),
      `the first round is parallel: ${stdout}`,
    );
    const second = [p, q, w, x];
    for (const [i, one] of second.entries()) {
      for (const other of second.slice(i + 1)) {
        assert.ok(!overlap(one, other), `one file at a time: ${one.file}, ${other.file}`);
      }
    }
    assert.ok(
      Math.max(a.end, b.end, o.end) <= Math.min(...second.map((r) => r.start)),
      "the rounds run in turn; the whole-process files in the second",
    );
    // 7 probes + 3 passes; 2 ignored, over the two rounds.
    assert.match(summary, /^ok \| 10 passed \| 0 failed \| 2 ignored \(\d+s, 2 rounds\)$/, stdout);
  },
);

Deno.test(
  "deno task test: a failure in the first round still runs tests/process, and the summary and exit code say FAILED",
  async () => {
    const { code, stdout, runs, summary } = await runSuite(true);
    assert.notEqual(code, 0, stdout);
    assert.ok(runs.some((r) => r.file === "p") && runs.some((r) => r.file === "q"), "round 2 ran");
    assert.match(
      summary,
      /^FAILED \| 9 passed \| 1 failed \| 2 ignored \(\d+s, 2 rounds\)$/,
      stdout,
    );
  },
);
