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

// `--run <script>` runs a script against the same server instead (`deno task schema`).
const args = Deno.args[0] === "--run"
  ? ["run", "-A", ...Deno.args.slice(1)]
  : ["test", "-A", ...(Deno.args.length > 0 ? Deno.args : ["tests/"])];
const child = new Deno.Command(Deno.execPath(), {
  args,
  env,
  stdin: "null",
}).spawn();
// A Ctrl-C reaches the child through the process group; SIGTERM or SIGHUP (a CI timeout, an
// IDE's stop button, a closed terminal) is passed on. Either way we wait for the child, then
// stop the throwaway server, which runs in its own session and would otherwise outlive us.
Deno.addSignalListener("SIGINT", () => {});
for (const signal of ["SIGTERM", "SIGHUP"] as const) {
  Deno.addSignalListener(signal, () => child.kill(signal));
}
const status = await child.status;
await stop();
Deno.exit(status.code);
