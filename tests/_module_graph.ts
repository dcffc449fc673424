/**
 * `deno info --json main.ts`, parsed: the module graph the worker loads (tests/process/dockerfile_test.ts,
 * tests/lib/admin/lazy_load_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";

/** The repository's root, as a `file:` URL ending in `/`. */
export const ROOT = new URL("../", import.meta.url);

/** One dependency edge of a module, as `deno info --json` gives it. */
export interface Dependency {
  code?: { specifier: string };
  isDynamic?: boolean;
}

/** The graph of `main.ts`: its roots and every module with its dependencies. */
export interface ModuleGraph {
  roots: string[];
  modules: Array<{ specifier: string; dependencies?: Dependency[] }>;
}

/**
 * Run `deno info --json main.ts` in the repository root.
 *
 * @throws AssertionError with deno's stderr when it fails.
 */
export async function mainModuleGraph(): Promise<ModuleGraph> {
  const info = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "main.ts"],
    cwd: ROOT.pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(info.success, new TextDecoder().decode(info.stderr));
  return JSON.parse(new TextDecoder().decode(info.stdout));
}
