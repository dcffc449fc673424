import assert from "node:assert/strict";
import { ERROR_RESPONSES } from "../../../lib/http/openapi_document.ts";
import { ingestionRoutes } from "../../../queues/ingestion/routes.ts";
import { editionRoutes, ssgRoutes } from "../../../queues/ssg/routes.ts";
import { autoPublishRoutes } from "../../../queues/auto_publish/routes.ts";
import { seoRoutes } from "../../../queues/seo_backfill/routes.ts";
import { UNLIMITED_BODY_PATHS, userBookRoutes } from "../../../queues/user_ingestion/routes.ts";
import { enrichmentRoutes } from "../../../queues/enrichment/routes.ts";
import { testApi, testControl } from "../../_api.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { queuesRoutes } from "../../../lib/http/queues.ts";
import { ingestionView } from "../../../queues/ingestion/view.ts";
import { ingestionContext } from "../../_ingestion.ts";

const TOKEN = "openapi-test-token-0123456789";
// deno-lint-ignore no-explicit-any
type Json = Record<string, any>;

// Every route group main.ts mounts, at the same prefixes (the process-level check that the real
// worker's document covers them is in tests/process/admin_browser_test.ts).
async function fullApi(db: TestDb) {
  const ctx = await ingestionContext(db);
  return testApi(ctx, TOKEN, {
    routes: {
      "/ingestion": ingestionRoutes(ctx, testControl(ctx)),
      "/ssg": ssgRoutes(ctx, testControl(ctx)),
      "/editions": editionRoutes(ctx),
      "/auto-publish": autoPublishRoutes({ ...ctx, indexNow: false }),
      "/seo": seoRoutes({ ...ctx, staleAfterMs: 3_600_000 }),
      "/user-books": userBookRoutes(ctx, 1024, testControl(ctx)),
      "/enrichment": enrichmentRoutes(ctx, testControl(ctx)),
      "/queues": queuesRoutes({
        views: [ingestionView],
        cache: { snapshot: undefined },
        control: testControl(ctx, db.schema),
        consumerState: () => null,
      }),
    },
    unlimitedBodies: UNLIMITED_BODY_PATHS,
  });
}

dbTest(
  "GET /internal/openapi.json describes every /internal route, from its validators",
  async (db) => {
    const app = await fullApi(db);
    assert.equal((await app.request("/internal/openapi.json")).status, 401);
    const res = await app.request("/internal/openapi.json", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(res.status, 200);
    const doc = await res.json();
    assert.equal(doc.openapi, "3.1.0");
    const registered = new Set(
      app.routes
        .filter((r) => r.method !== "ALL" && r.path.startsWith("/internal"))
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}")}`),
    );
    assert.ok(registered.size >= 30, `${registered.size} routes`);
    const documented = new Set<string>();
    for (const [path, methods] of Object.entries(doc.paths as Record<string, object>)) {
      for (const method of Object.keys(methods)) documented.add(`${method} ${path}`);
    }
    // Exactly the registered routes, paths in full, each with a summary.
    assert.deepEqual([...documented].sort(), [...registered].sort());
    for (const route of registered) {
      const [method, path] = route.split(" ");
      const op = doc.paths[path][method];
      assert.ok(op.summary, `${route} has no summary`);
      // Every path parameter's schema is its validator's (the fallback is a bare string).
      for (const name of path.match(/\{(\w+)\}/g) ?? []) {
        const param = op.parameters.find((p: { name: string }) => `{${p.name}}` === name);
        assert.ok(param?.in === "path" && param.required, `${route}: ${name}`);
        assert.ok(
          param.schema.pattern || param.schema.anyOf || param.schema.enum,
          `${route}: ${name} is not validated`,
        );
      }
    }
    // The request body schema is the validator's own: a field the zod schema has is in it.
    const body = doc.paths["/internal/ingestion/jobs"].post.requestBody.content["application/json"];
    assert.deepEqual(body.schema.required, ["source_path"]);
    assert.equal(body.schema.additionalProperties, false);
    const param = doc.paths["/internal/ingestion/jobs/{id}"].get.parameters[0];
    assert.equal(param.in, "path");
    assert.equal(param.schema.pattern, "^[1-9]\\d{0,18}$");
    // A body the route parses by hand (the upload) is described by the schemas it parses with.
    const upload = doc.paths["/internal/user-books"].post;
    assert.deepEqual(Object.keys(upload.requestBody.content).sort(), [
      "application/json",
      "multipart/form-data",
    ]);
    const form = upload.requestBody.content["multipart/form-data"].schema;
    assert.deepEqual(form.required.sort(), ["file", "owner_id"]);
    // A claim's body may be left out; a settle's may not.
    assert.equal(doc.paths["/internal/seo/jobs/claim"].post.requestBody.required, false);
    const settle = doc.paths["/internal/seo/jobs/{id}/complete"].post.requestBody;
    assert.equal(settle.required, true);
    assert.ok(settle.content["application/json"].schema.properties.claim_token);
    const list = doc.paths["/internal/auto-publish/jobs"].get.parameters
      .map((p: { name: string; in: string }) => `${p.in}:${p.name}`).sort();
    assert.deepEqual(list, [
      "query:before",
      "query:cursor",
      "query:limit",
      "query:q",
      "query:status",
    ]);
    // Every operation has an operationId, unique, and the document its server and licence.
    const ids = [...registered].map((route) => {
      const [method, path] = route.split(" ");
      return doc.paths[path][method].operationId as string;
    });
    assert.equal(new Set(ids).size, ids.length, "operationIds are unique");
    assert.ok(ids.every((id) => /^[a-z][A-Za-z0-9]+$/.test(id)), ids.join(" "));
    const op = (method: string, path: string) => doc.paths[`/internal${path}`][method].operationId;
    assert.equal(op("get", "/ingestion/jobs"), "listIngestionJobs");
    assert.equal(op("get", "/ingestion/jobs/{id}"), "getIngestionJob");
    assert.equal(op("post", "/ingestion/jobs"), "createIngestionJob");
    assert.equal(op("post", "/ingestion/jobs/{id}/retry"), "retryIngestionJob");
    assert.equal(op("post", "/ingestion/jobs/retry"), "bulkRetryIngestionJobs");
    assert.equal(op("post", "/ingestion/jobs/{id}/cancel"), "cancelIngestionJob");
    assert.equal(op("post", "/seo/jobs/{id}/give-back"), "giveBackSeoJob");
    assert.equal(op("post", "/queues/{queue}/pause"), "pauseQueue");
    assert.equal(op("get", "/events"), "streamEvents");
    assert.deepEqual(doc.servers, [{ url: "http://localhost", description: "This worker" }]);
    assert.ok(doc.info.license.name);

    // The error answers in front of every handler are listed, each a JSON `{ error }`.
    const refs = new Map<string, number>();
    for (const [status, { name }] of Object.entries(ERROR_RESPONSES)) {
      refs.set(`#/components/responses/${name}`, Number(status));
      const shared = doc.components.responses[name];
      assert.equal(
        shared.content["application/json"].schema.$ref,
        "#/components/schemas/Error",
        name,
      );
    }
    assert.ok(doc.components.responses.Unauthorized.headers["WWW-Authenticate"]);
    assert.ok(doc.components.responses.MethodNotAllowed.headers.Allow);
    assert.ok(doc.components.responses.ServiceUnavailable.headers["Retry-After"]);
    for (const route of registered) {
      const [method, path] = route.split(" ");
      const op = doc.paths[path][method];
      const statuses = Object.keys(op.responses);
      const expect = (status: number, applies: boolean) =>
        assert.equal(statuses.includes(String(status)), applies, `${route}: ${status}`);
      expect(401, true);
      expect(405, true);
      expect(503, !["/internal/openapi.json", "/internal/queues"].includes(path));
      expect(400, (op.parameters?.length ?? 0) > 0 || op.requestBody !== undefined);
      expect(413, op.requestBody !== undefined);
      if (path.includes("{")) expect(404, true);
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        if (status === "4XX" || Number(status) >= 400) {
          const content = response.$ref
            ? doc.components.responses[response.$ref.split("/").pop()].content
            : response.content;
          assert.equal(
            content?.["application/json"]?.schema?.$ref,
            "#/components/schemas/Error",
            `${route} ${status}`,
          );
        }
        if (response.$ref) assert.equal(refs.get(response.$ref), Number(status), route);
      }
    }
    // And the answers are the worker's: a wrong method on every path is 405 with Allow, a body
    // over 64 KiB on every route that takes one is 413, no token is 401 with the challenge.
    const auth = { authorization: `Bearer ${TOKEN}` };
    for (const [path, methods] of Object.entries(doc.paths as Record<string, Json>)) {
      const url = path.replace(/\{\w+\}/g, "1");
      const res = await app.request(url, { method: "DELETE", headers: auth });
      assert.equal(res.status, 405, path);
      assert.ok(res.headers.get("allow"), path);
      await res.body?.cancel();
      for (const [method, op] of Object.entries(methods)) {
        const none = await app.request(url, { method: method.toUpperCase() });
        assert.equal(none.status, 401, `${method} ${path}`);
        assert.match(none.headers.get("www-authenticate") ?? "", /^Bearer realm=/);
        await none.body?.cancel();
        if (!op.requestBody) continue;
        const big = await app.request(url, {
          method: method.toUpperCase(),
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ pad: "x".repeat(70 * 1024) }),
        });
        assert.equal(big.status, 413, `${method} ${path}`);
        await big.body?.cancel();
      }
    }

    // docs/http-api.md's route table is this document: method, path and summary of every route.
    const rows: string[][] = [];
    for (const [path, methods] of Object.entries(doc.paths as Record<string, object>)) {
      for (const [method, op] of Object.entries(methods as Record<string, { summary: string }>)) {
        rows.push([method.toUpperCase(), `\`${path}\``, op.summary]);
      }
    }
    const readme = await Deno.readTextFile(new URL("../../../docs/http-api.md", import.meta.url));
    const table = readme.split("<!-- routes:start")[1]?.split("<!-- routes:end -->")[0] ?? "";
    const inReadme = table.split("\n").filter((line) =>
      /^\| (GET|POST|PUT|PATCH|DELETE) /.test(line)
    )
      .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
    assert.deepEqual(
      inReadme,
      rows,
      "docs/http-api.md's route table differs from the document; paste this between its markers:\n\n" +
        "| Method | Path | What |\n| --- | --- | --- |\n" +
        rows.map((r) => `| ${r.join(" | ")} |`).join("\n"),
    );
  },
);

dbTest(
  "every route with an id in its path takes ids up to 9223372036854775807 and refuses one past it naming the range",
  async (db) => {
    // docs/http-api.md: "ids are accepted up to 9223372036854775807" (PostgreSQL bigint).
    const app = await fullApi(db);
    const routes = app.routes.filter((r) =>
      r.method !== "ALL" && r.path.startsWith("/internal") && /:\w*[iI]d\b/.test(r.path)
    );
    assert.ok(routes.length >= 20, `${routes.length} routes with an id`);
    const MAX = 9223372036854775807n;
    const request = (method: string, path: string, id: bigint) =>
      app.request(path.replace(/:\w+(\{[^}]*\})?/, String(id)), {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: method === "GET" ? undefined : "{}",
      });
    for (const { method, path } of routes) {
      // Any id of 1 to 19 digits up to the bigint maximum reaches the route: never "Invalid id".
      for (let i = 0; i < 3; i++) {
        const digits = Array.from(
          { length: 1 + Math.floor(Math.random() * 19) },
          (_, j) => String(Math.floor(Math.random() * (j === 0 ? 9 : 10)) + (j === 0 ? 1 : 0)),
        ).join("");
        const id = BigInt(digits) > MAX ? MAX : BigInt(digits);
        for (const candidate of [id, MAX, 10n ** 18n]) {
          const res = await request(method, path, candidate);
          const body = await res.json();
          assert.ok(
            !(res.status === 400 && /^Invalid (id|bookId|path)\b/.test(body.error)),
            `${method} ${path} with id ${candidate}: ${res.status} ${JSON.stringify(body)}`,
          );
        }
      }
      const res = await request(method, path, MAX + 1n);
      assert.equal(res.status, 400, `${method} ${path} with id ${MAX + 1n}`);
      assert.match((await res.json()).error, /up to 9223372036854775807/, `${method} ${path}`);
    }
  },
);

/** The pinned linter: a dev tool, run through npm, never imported by the worker. */
const REDOCLY = "npm:@redocly/cli@2.77.0";

dbTest(
  "GET /internal/openapi.json passes `@redocly/cli lint` with no error",
  async (db) => {
    const app = await fullApi(db);
    const res = await app.request("/internal/openapi.json", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const dir = await Deno.makeTempDir({ prefix: "openapi-lint-" });
    try {
      const file = `${dir}/openapi.json`;
      await Deno.writeTextFile(file, await res.text());
      const lint = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", REDOCLY, "lint", "--format=json", file],
        cwd: dir,
        env: { NO_COLOR: "1", REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const out = new TextDecoder().decode(lint.stdout);
      const err = new TextDecoder().decode(lint.stderr);
      let report: {
        totals?: { errors: number; warnings: number };
        problems?: { severity: string; ruleId: string; message: string }[];
      };
      try {
        report = JSON.parse(out);
      } catch {
        const why = `${REDOCLY} did not run (is the npm registry reachable?): ${err.slice(-400)}`;
        if (Deno.env.get("CI") === "true") throw new Error(why);
        console.warn(`SKIPPED: ${why}`);
        return;
      }
      assert.ok(report.totals, "the linter's report has its totals");
      console.log(
        `redocly lint: ${report.totals.errors} errors, ${report.totals.warnings} warnings`,
      );
      const errors = (report.problems ?? []).filter((p) => p.severity === "error");
      assert.deepEqual(errors.map((p) => `${p.ruleId}: ${p.message}`), []);
      assert.equal(lint.code, 0, err.slice(-400));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
