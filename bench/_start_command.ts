/**
 * The worker's command line as a checkout starts it: its `deno.json` `start` task (the Dockerfile's
 * ENTRYPOINT is the same with its paths scoped, tests/process/dockerfile_test.ts), so a bench measuring
 * another checkout (`--checkout`) runs that checkout's permissions and V8 flags too, and the
 * process tests (tests/_worker.ts) run the worker with the task's permissions.
 *
 * @module
 */

/**
 * The `deno` arguments of `<dir>/deno.json`'s `start` task, `main.ts` made absolute.
 *
 * @param dir the checkout's root directory (absolute path).
 * @param v8Flags V8 flags to add to the task's own `--v8-flags` (a later flag overrides an earlier
 *   one), e.g. `["--max-semi-space-size=2"]`.
 * @returns e.g. `["run", "--allow-net", …, "--v8-flags=--max-semi-space-size=4", "/path/to/checkout/main.ts"]`.
 * @throws Error when the task is not `deno … main.ts`.
 */
export function startArgs(dir: string, v8Flags: string[] = []): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${dir}/deno.json`));
  const [deno, ...args] = String(config.tasks?.start ?? "").trim().split(/\s+/);
  if (deno !== "deno" || args.at(-1) !== "main.ts") {
    throw new Error(`Cannot read the start task of "${dir}/deno.json": expected "deno … main.ts"`);
  }
  args[args.length - 1] = `${dir}/main.ts`;
  if (v8Flags.length === 0) return args;
  const at = args.findIndex((a) => a.startsWith("--v8-flags="));
  if (at < 0) return [...args.slice(0, -1), `--v8-flags=${v8Flags.join(",")}`, args.at(-1)!];
  args[at] = [args[at], ...v8Flags].join(",");
  return args;
}
