/**
 * What the worker loads only on first use (what no request needs is not held at
 * idle), checked on `main.ts`'s module graph (`deno info`): the dashboard, the OpenAPI document's
 * builder and the multipart parser are reached only through dynamic imports. How a lazily loaded
 * app answers is tests/lib/http/api_test.ts's; that the worker still serves them, tests/process/process_test.ts
 * and tests/lib/admin/metrics_test.ts (main.ts spawned for real).
 *
 * @module
 */
import assert from "node:assert/strict";
import { mainModuleGraph, ROOT } from "../../_module_graph.ts";

/** Loaded on first use, never at startup: local paths, and npm package names. */
const LAZY = [
  "lib/admin/dashboard.tsx",
  "lib/admin/pages.tsx",
  "lib/http/openapi_document.ts",
  "npm:busboy",
];

/** A queue folder's setup, which main.ts's queue list imports when it starts. */
const SETUP = /\/queues\/[a-z_]+\/setup\.ts$/;

Deno.test("main.ts loads the dashboard, the OpenAPI document and busboy on first use, not at startup", async () => {
  const graph = await mainModuleGraph();
  const deps = new Map(graph.modules.map((m) => [m.specifier, m.dependencies ?? []]));
  // `npm:busboy@1.6.0` → `npm:busboy`; a local file → its path in the repository.
  const name = (specifier: string) =>
    specifier.startsWith("npm:")
      ? specifier.replace(/^npm:\/?/, "npm:").replace(/(.)@[^/@]+$/, "$1")
      : specifier.slice(ROOT.href.length);
  const reach = (dynamic: boolean): Set<string> => {
    const seen = new Set<string>();
    const todo = [...graph.roots];
    while (todo.length) {
      const at = todo.pop()!;
      if (seen.has(at)) continue;
      seen.add(at);
      for (const dep of deps.get(at) ?? []) {
        // main.ts awaits its queues' setups at startup (its queue list imports them one a line).
        const startup = !dep.isDynamic || SETUP.test(dep.code?.specifier ?? "");
        if (dep.code && (dynamic || startup)) todo.push(dep.code.specifier);
      }
    }
    return new Set([...seen].map(name));
  };
  const atStartup = reach(false);
  const ever = reach(true);
  assert.ok(
    atStartup.has("lib/http/api.ts") && atStartup.has("npm:postgres") &&
      atStartup.has("queues/ingestion/routes.ts"),
    [...atStartup].join(),
  );
  for (const lazy of LAZY) {
    assert.ok(ever.has(lazy), `${lazy} is not in main.ts's graph at all`);
    assert.ok(!atStartup.has(lazy), `${lazy} is imported at startup`);
  }
});
