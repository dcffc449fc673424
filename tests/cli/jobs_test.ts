/**
 * `deno task jobs` (cli/jobs.ts) on bad usage: every malformed command line is exit 2 before any
 * request (docs/operations.md's exit codes), so no worker runs here; the URL points at a closed
 * port, where a request that went out anyway would be exit 5.
 *
 * @module
 */
import assert from "node:assert/strict";
import { EXIT } from "../../cli/api.ts";
import { main } from "../../cli/jobs.ts";

const QUEUES = ["ingestion", "user_ingestion", "enrichment", "ssg", "auto_publish", "seo_backfill"];

async function run(args: string[]) {
  const lines: string[] = [];
  const code = await main([...args, "--url", "http://127.0.0.1:9"], {
    env: { INTERNAL_API_TOKEN: "cli-test-token-0123456789" },
    out: (line) => lines.push(line),
    err: (line) => lines.push(line),
    confirm: null,
  });
  return { code, output: lines.join("\n") };
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)];

Deno.test("jobs: a command given more arguments than it takes is bad usage (exit 2), nothing sent", async () => {
  for (let i = 0; i < 40; i++) {
    const queue = pick(QUEUES);
    const extra = pick(["2", "x", queue, "ingestion", "9223372036854775807"]);
    const args = pick([
      ["queues", extra],
      ["stats", extra],
      ["list", queue, extra],
      ["show", queue, "1", extra],
      ["retry", queue, "1", extra],
      ["cancel", queue, "1", extra],
      ["pause", queue, extra],
      ["resume", queue, extra],
    ]);
    const { code, output } = await run(args);
    assert.equal(code, EXIT.usage, `jobs ${args.join(" ")}: ${output}`);
    assert.match(output, /argument/, `jobs ${args.join(" ")}: ${output}`);
  }
});

Deno.test("jobs: an id past the bigint maximum is a malformed id (exit 2), nothing sent", async () => {
  const MAX = 9223372036854775807n;
  for (let i = 0; i < 30; i++) {
    const id = String(MAX + 1n + BigInt(Math.floor(Math.random() * 1e15)));
    const args = [pick(["show", "retry", "cancel"]), pick(QUEUES), id];
    const { code, output } = await run(args);
    assert.equal(code, EXIT.usage, `jobs ${args.join(" ")}: ${output}`);
    assert.match(output, /9223372036854775807/, `jobs ${args.join(" ")}: ${output}`);
  }
});
