/**
 * The `deno.json` imports the worker itself never loads (test-only packages such as
 * playwright-core), found from its module graphs: `main.ts`, plus every local module a graph
 * module names as `new URL("./….ts", import.meta.url)` (the book-extraction Web Worker, which
 * `deno info` does not follow). The image's builder stage removes them (`--remove`, through
 * `deno remove`) before caching the dependencies, so the runtime image holds production packages
 * only.
 *
 * Usage: `deno run --allow-read --allow-run --allow-env tools/production_imports.ts [--remove]`
 * in the checkout's root prints one unused import name per line (and removes them); with
 * `--entries` instead, the entry modules, one per line.
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

/** The production module graphs of a checkout, as far as the image's builder needs them. */
export interface ProductionGraph {
  /** The entry modules, relative to the root: `main.ts` first, e.g. `books/extract_child.ts`. */
  entries: string[];
  /** Sorted `imports` keys no production module uses, e.g. `["playwright-core"]`. */
  unused: string[];
}

/**
 * The entry points of `<root>`'s production code and the `deno.json` imports none of them uses.
 *
 * @param root the checkout's root directory (absolute path, no trailing slash).
 * @throws Error when `deno info` fails on an entry point.
 */
export async function productionGraph(root: string): Promise<ProductionGraph> {
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
  return { entries: [...done], unused: keys.filter((key) => !used.has(key)).sort() };
}

if (import.meta.main) {
  const { entries, unused } = await productionGraph(Deno.cwd());
  if (Deno.args.includes("--entries")) {
    console.log(entries.join("\n"));
    Deno.exit(0);
  }
  for (const name of unused) console.log(name);
  if (Deno.args.includes("--remove") && unused.length > 0) {
    const removed = await new Deno.Command(Deno.execPath(), {
      args: ["remove", ...unused.map((name) => name.replace(/\/$/, ""))],
    }).output();
    if (!removed.success) Deno.exit(removed.code || 1);
  }
}
