/**
 * The `deno.json` imports the worker itself never loads (test-only packages such as
 * playwright-core), found from its module graphs: `main.ts`, plus every local module a graph
 * module names as `new URL("./….ts", import.meta.url)` (the book-extraction Web Worker, which
 * `deno info` does not follow). The image's builder stage removes them (`--remove`, through
 * `deno remove`) before caching the dependencies, so the runtime image holds production packages
 * only.
 *
 * Usage: `deno run --allow-read --allow-run --allow-env tools/production_imports.ts [--remove]`
 * in the checkout's root. Prints one unused import name per line.
 *
 * @module
 */

/** One module of `deno info --json`, as far as read here. */
interface InfoModule {
  specifier: string;
  local?: string;
  dependencies?: Array<{ specifier: string }>;
}

async function info(root: string, entry: string): Promise<InfoModule[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`deno info ${entry} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(out.stdout)).modules;
}

/** The import map key a bare specifier resolves through: `hono/jsx` → `hono/`, `zod` → `zod`. */
function importKey(specifier: string, keys: string[]): string | undefined {
  if (keys.includes(specifier)) return specifier;
  return keys.find((key) => key.endsWith("/") && specifier.startsWith(key));
}

/**
 * The `imports` keys of `<root>/deno.json` that no production module graph uses.
 *
 * @param root the checkout's root directory (absolute path, no trailing slash).
 * @returns sorted import names, e.g. `["parse-prometheus-text-format", "playwright-core"]`.
 * @throws Error when `deno info` fails on an entry point.
 */
export async function unusedImports(root: string): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${root}/deno.json`));
  const keys = Object.keys(config.imports ?? {});
  const rootUrl = new URL(`file://${root}/`).href;
  const used = new Set<string>();
  const entries = ["main.ts"];
  const done = new Set<string>();
  while (entries.length) {
    const entry = entries.pop()!;
    if (done.has(entry)) continue;
    done.add(entry);
    for (const module of await info(root, entry)) {
      // Local sources only: a package's own imports resolve through its package.json, not ours.
      if (!module.specifier.startsWith(rootUrl) || module.specifier.includes("/node_modules/")) {
        continue;
      }
      for (const dep of module.dependencies ?? []) {
        const key = importKey(dep.specifier, keys);
        if (key) used.add(key);
      }
      if (module.local?.endsWith(".ts") || module.local?.endsWith(".tsx")) {
        const text = await Deno.readTextFile(module.local);
        for (
          const [, path] of text.matchAll(/new URL\("(\.{1,2}\/[^"]+\.tsx?)", import\.meta\.url\)/g)
        ) {
          const url = new URL(path, module.specifier).href;
          if (url.startsWith(rootUrl)) entries.push(url.slice(rootUrl.length));
        }
      }
    }
  }
  return keys.filter((key) => !used.has(key)).sort();
}

if (import.meta.main) {
  const unused = await unusedImports(Deno.cwd());
  for (const name of unused) console.log(name);
  if (Deno.args.includes("--remove") && unused.length > 0) {
    const removed = await new Deno.Command(Deno.execPath(), {
      args: ["remove", ...unused.map((name) => name.replace(/\/$/, ""))],
    }).output();
    if (!removed.success) Deno.exit(removed.code || 1);
  }
}
