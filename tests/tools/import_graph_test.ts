/**
 * The production modules' import graph, read from their source: no module imports itself back
 * through others at run time (an import cycle makes a module's values depend on load order), and
 * `lib/` never imports a queue (queues build on the runtime, never the reverse; docs/development.md).
 * Type-only imports are left out: they are erased before anything runs.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = normalize(join(dirname(fileURLToPath(import.meta.url)), "..", ".."));
const FOLDERS = ["lib", "queues", "books", "site", "cli", "examples"];

/** Every production `.ts`/`.tsx` file, relative to the checkout's root. */
function productionFiles(): string[] {
  const found = ["main.ts"];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(join(ROOT, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (/\.tsx?$/.test(entry.name)) found.push(path);
    }
  };
  for (const folder of FOLDERS) walk(folder);
  return found;
}

const STATEMENT = /^(import|export)\s+(type\s+)?([\s\S]*?)\s*from\s*"([^"]+)";/gm;

/**
 * The local modules `file` imports at run time: `import`/`export … from "./x.ts"` whose bindings
 * are not all `type`.
 */
export function runtimeImports(file: string, text: string): string[] {
  const out: string[] = [];
  for (const [, , typeOnly, bindings, specifier] of text.matchAll(STATEMENT)) {
    if (typeOnly || !specifier.startsWith(".")) continue;
    const braces = /^\{([\s\S]*)\}$/.exec(bindings.trim());
    if (braces) {
      const names = braces[1].split(",").map((s) => s.trim()).filter(Boolean);
      if (names.length > 0 && names.every((n) => n.startsWith("type "))) continue;
    }
    out.push(relative(ROOT, join(ROOT, dirname(file), specifier)));
  }
  return out;
}

/** The cycles of `graph` (each as the modules on it, in import order), found by depth-first search. */
export function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return found;
}

function graph(): Map<string, string[]> {
  const edges = new Map<string, string[]>();
  for (const file of productionFiles()) {
    edges.set(file, runtimeImports(file, Deno.readTextFileSync(join(ROOT, file))));
  }
  return edges;
}

Deno.test("the reader of imports tells run-time imports from type-only ones and finds a cycle", () => {
  const text = [
    'import { type A, b } from "./b.ts";',
    'import type { C } from "./c.ts";',
    'import {\n  type D,\n  type E,\n} from "./d.ts";',
    'export { f } from "../f.ts";',
    'import { z } from "zod";',
  ].join("\n");
  assert.deepEqual(runtimeImports("lib/a.ts", text), ["lib/b.ts", "f.ts"]);
  const g = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]]);
  assert.deepEqual(cycles(g), [["a", "b", "c", "a"]]);
  assert.deepEqual(cycles(new Map([["a", ["b"]], ["b", []]])), []);
});

Deno.test("no production module imports itself back at run time", () => {
  const g = graph();
  assert.ok(g.size > 100, `only ${g.size} modules read`);
  assert.deepEqual(cycles(g).map((c) => c.join(" → ")), []);
});

Deno.test("lib/ never imports a queue", () => {
  const wrong = [...graph()].flatMap(([file, imports]) =>
    file.startsWith("lib/")
      ? imports.filter((i) => i.startsWith("queues/")).map((i) => `${file} → ${i}`)
      : []
  );
  assert.deepEqual(wrong, []);
});
