/**
 * tests/_requires.ts, the skip rule of a test that needs a system package, run as `deno test`
 * runs it: a child `deno test` of a file of `toolTest`s and `dbTest`s with `requires` (tests/_db.ts),
 * each of which fails when it runs, on a
 * PATH holding only `sh` and stand-in `jq` and `curl` executables (so pgbouncer, shellcheck and
 * docker are missing), once without CI, once with `CI=true`, once with `CI=1`.
 *
 * @module
 */
import assert from "node:assert/strict";

const REQUIRES = new URL("../_requires.ts", import.meta.url).href;
const DB = new URL("../_db.ts", import.meta.url).href;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/** [tools, present on the test PATH] */
const CASES: [string[], boolean][] = [
  [["jq"], true],
  [["curl"], true],
  [["jq", "curl"], true],
  [["pgbouncer"], false],
  [["shellcheck"], false],
  [["docker"], false],
  [["jq", "docker", "shellcheck"], false],
];

const INSTALL: Record<string, string> = {
  pgbouncer: "apt-get install pgbouncer",
  shellcheck: "apt-get install shellcheck",
  docker: "apt-get install docker.io debootstrap",
};

/** Each test's line in `deno test`'s report: name → "ok" | "FAILED" | "ignored". */
async function runProbe(ci: string | undefined): Promise<Map<string, string>> {
  const dir = await Deno.makeTempDir({ prefix: "textstack-requires-" });
  try {
    await Deno.mkdir(`${dir}/bin`);
    await Deno.symlink("/bin/sh", `${dir}/bin/sh`);
    for (const tool of ["jq", "curl"]) {
      await Deno.writeTextFile(`${dir}/bin/${tool}`, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    }
    const tests = CASES.flatMap(([tools]) => [
      `toolTest(${JSON.stringify(`probe ${tools.join("+")}`)}, ${JSON.stringify(tools)}, () => {
  throw new Error("ran");
});`,
      `dbTest(${JSON.stringify(`probe db ${tools.join("+")}`)}, () => {
  throw new Error("ran");
}, { requires: ${JSON.stringify(tools)} });`,
    ]);
    await Deno.writeTextFile(
      `${dir}/probe_test.ts`,
      `import { toolTest } from ${JSON.stringify(REQUIRES)};
import { dbTest } from ${JSON.stringify(DB)};
${tests.join("\n")}
`,
    );
    const env: Record<string, string> = { PATH: `${dir}/bin`, NO_COLOR: "1" };
    for (const name of ["HOME", "DENO_DIR", "XDG_CACHE_HOME", "DATABASE_URL"]) {
      const value = Deno.env.get(name);
      if (value !== undefined) env[name] = value;
    }
    if (ci !== undefined) env.CI = ci;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["test", "-A", "--no-check", "--config", CONFIG, "probe_test.ts"],
      cwd: dir,
      clearEnv: true,
      env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    const lines = new Map<string, string>();
    for (const m of text.matchAll(/^(probe .+?) \.\.\. (ok|FAILED|ignored)\b/gm)) {
      lines.set(m[1], m[2]);
    }
    assert.equal(lines.size, 2 * CASES.length, text + new TextDecoder().decode(out.stderr));
    assert.equal(out.success, false, "at least one probe ran and failed");
    return lines;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("toolTest() and dbTest(requires): a test whose package is present runs; a missing one is ignored, naming the packages and their install, unless CI=true, where it runs and fails", async () => {
  for (const ci of [undefined, "true", "1"]) {
    const lines = await runProbe(ci);
    for (const [tools, present] of CASES) {
      const missing = tools.filter((t) => t in INSTALL);
      for (const name of [`probe ${tools.join("+")}`, `probe db ${tools.join("+")}`]) {
        const label = `${name} with CI=${ci}`;
        if (present || ci === "true") {
          assert.equal(lines.get(name), "FAILED", `${label}: runs (and its failure shows)`);
        } else {
          const note = `needs ${missing.join(", ")}: ${missing.map((t) => INSTALL[t]).join("; ")}`;
          assert.equal(lines.get(`${name} [skipped: ${note}]`), "ignored", label);
        }
      }
    }
  }
});
