/**
 * The OpenAPI 3.1 document of the API, built from what lib/http/openapi.ts recorded on the
 * routes. Loaded on the first `GET /internal/openapi.json`, not at startup.
 *
 * {@linkcode openApiDocument} walks a Hono app's registered routes (mounted sub-apps included,
 * paths in full) and turns every recorded schema into JSON Schema with zod 4's `z.toJSONSchema`.
 * A route with nothing recorded still appears, with its path parameters. A route that parses its
 * body itself (the multipart upload) names the schemas it checks with in its description, so they
 * too come from the checking code.
 *
 * Every operation also lists the error answers of the layers in front of its handler, each a
 * JSON `{ error }` ({@linkcode ERROR_RESPONSES}): 401 (the bearer guard) and 405 (a wrong
 * method on the path) always, 503 unless the route never touches the database, 400 when it has
 * parameters or a body to validate, 404 when its path names a resource, 413 when it takes a body.
 * A status the route describes itself keeps its own description.
 *
 * Every operation has an `operationId`: the route's own, else one derived from its method and
 * path ({@linkcode operationIdOf}), so a generated client gets readable method names.
 *
 * @module
 */
import type { Hono } from "hono";
import { z } from "zod";
import { COMPOSED_HANDLER } from "hono/utils/constants";
import { RECORD, type Recorded } from "./openapi.ts";

// deno-lint-ignore no-explicit-any
type Json = Record<string, any>;

const ERROR_CONTENT = {
  "application/json": { schema: { $ref: "#/components/schemas/Error" } },
};
const header = (description: string) => ({ description, schema: { type: "string" } });

/**
 * The error answers shared by every `/internal` route, by status, as the document's
 * `components.responses`.
 */
export const ERROR_RESPONSES: Readonly<Record<number, { name: string; response: Json }>> = {
  400: {
    name: "BadRequest",
    response: {
      description: "Bad input: a path parameter, query or body that fails its schema (the error " +
        "names the field)",
      content: ERROR_CONTENT,
    },
  },
  401: {
    name: "Unauthorized",
    response: {
      description: "No bearer token (no Authorization header, or another scheme), or a wrong or " +
        "malformed one",
      headers: {
        "WWW-Authenticate": header(
          'Bearer realm="textstack-internal", plus error="invalid_token" for a wrong token',
        ),
      },
      content: ERROR_CONTENT,
    },
  },
  404: { name: "NotFound", response: { description: "No such resource", content: ERROR_CONTENT } },
  405: {
    name: "MethodNotAllowed",
    response: {
      description: "Another method on this path: `Allow` lists the methods it has",
      headers: { Allow: header("The path's methods, e.g. `GET, POST`") },
      content: ERROR_CONTENT,
    },
  },
  413: {
    name: "PayloadTooLarge",
    response: {
      description: "The request body exceeds 64 KiB (refused before it is read)",
      content: ERROR_CONTENT,
    },
  },
  503: {
    name: "ServiceUnavailable",
    response: {
      description: "The database is unavailable: retry after `Retry-After` seconds",
      headers: { "Retry-After": header("Seconds to wait, e.g. `5`") },
      content: ERROR_CONTENT,
    },
  },
};

// The last word of a path segment in the singular ("jobs" → "job"), for an item's operation.
const singular = (word: string): string => word.replace(/s$/, "");
const camel = (words: string[]): string =>
  words.flatMap((w) => w.split(/[^A-Za-z0-9]+/)).filter(Boolean)
    .map((w, i) => i === 0 ? w[0].toLowerCase() + w.slice(1) : w[0].toUpperCase() + w.slice(1))
    .join("");
// Literal last segments that name an action on a collection, not a collection.
const COLLECTION_ACTIONS: Record<string, string> = {
  retry: "bulkRetry",
  claim: "claim",
  crew: "crew",
  recover: "recover",
  "rebuild-all": "rebuildAll",
};

/**
 * The `operationId` of a route without its own: `list`/`create` a collection, `get` an item, the
 * action's verb on an item (`retryIngestionJob`, `pauseQueue`) or a collection
 * (`bulkRetryIngestionJobs`, `claimAutoPublishJobs`).
 *
 * @param path the OpenAPI path without the API's prefix, e.g. `/ingestion/jobs/{id}/retry`.
 * @example
 * operationIdOf("POST", "/ingestion/jobs/{id}/retry"); // "retryIngestionJob"
 */
export function operationIdOf(method: string, path: string): string {
  const segments = path.split("/").filter(Boolean);
  const isParam = (s: string | undefined) => s !== undefined && /^\{.*\}$/.test(s);
  const literals = segments.filter((s) => !isParam(s));
  const last = segments[segments.length - 1];
  const verb = method.toLowerCase();
  if (isParam(last)) {
    const noun = [...literals.slice(0, -1), singular(literals[literals.length - 1] ?? "item")];
    return camel([verb === "get" ? "get" : verb, ...noun]);
  }
  if (segments.length >= 2 && isParam(segments[segments.length - 2])) {
    const noun = literals.slice(0, -1);
    noun[noun.length - 1] = singular(noun[noun.length - 1]);
    return camel([last, ...noun]);
  }
  if (literals.length >= 2 && verb === "post" && COLLECTION_ACTIONS[last]) {
    return camel([COLLECTION_ACTIONS[last], ...literals.slice(0, -1)]);
  }
  if (verb === "get") return camel(["list", ...literals]);
  if (verb === "post") {
    return camel(["create", ...literals.slice(0, -1), singular(literals[literals.length - 1])]);
  }
  return camel([verb, ...literals]);
}

function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    io: "input",
    unrepresentable: "any",
  }) as Json;
  return rest;
}

/**
 * Build the OpenAPI 3.1 document of every route of `app` whose path starts with `prefix`.
 *
 * @param app the top-level app (after every sub-app is mounted).
 * @param info the document's `info` (title, version).
 * @returns the document as a plain object, ready for `c.json`.
 * @example
 * app.get("/internal/openapi.json", (c) => c.json(openApiDocument(app, "/internal", info)));
 */
export function openApiDocument(
  app: Hono,
  prefix: string,
  info: {
    title: string;
    version: string;
    description?: string;
    license?: { name: string; identifier?: string; url?: string };
  },
  servers: { url: string; description?: string }[] = [],
): Json {
  const ids = new Set<string>();
  const operations = new Map<string, { method: string; path: string; recorded: Recorded[] }>();
  for (const route of app.routes) {
    if (route.method === "ALL" || !route.path.startsWith(prefix)) continue;
    const key = `${route.method} ${route.path}`;
    const op = operations.get(key) ?? { method: route.method, path: route.path, recorded: [] };
    // A sub-app with its own onError is mounted wrapped; Hono keeps the original on the wrapper.
    let handler = route.handler as unknown as Record<string | symbol, unknown>;
    while (!handler[RECORD] && typeof handler[COMPOSED_HANDLER] === "function") {
      handler = handler[COMPOSED_HANDLER] as unknown as Record<string | symbol, unknown>;
    }
    const recorded = handler[RECORD] as Recorded | undefined;
    if (recorded) op.recorded.push(recorded);
    operations.set(key, op);
  }
  const paths: Json = {};
  for (const { method, path, recorded } of operations.values()) {
    // `:id{[0-9]+}` (a Hono pattern with its regex) is the OpenAPI `{id}`.
    const openApiPath = path.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");
    const described = recorded.find((r) => r.kind === "describe")?.route;
    const parameters: Json[] = [];
    const pathNames = [...path.matchAll(/:(\w+)/g)].map((m) => m[1]);
    let requestBody: Json | undefined;
    if (described?.body) {
      const content: Json = {};
      for (const [type, schema] of Object.entries(described.body)) {
        content[type] = { schema: jsonSchema(schema) };
      }
      requestBody = { required: true, content };
    }
    for (const r of recorded) {
      if (r.kind !== "validate") continue;
      const schema = jsonSchema(r.schema);
      if (r.target === "json") {
        requestBody = {
          required: !described?.optionalBody,
          content: { "application/json": { schema } },
        };
      } else if (r.target === "form") {
        requestBody = {
          required: true,
          content: { "application/x-www-form-urlencoded": { schema } },
        };
      } else {
        const where = r.target === "param" ? "path" : r.target;
        for (const [name, property] of Object.entries(schema.properties ?? {})) {
          parameters.push({
            name,
            in: where,
            required: where === "path" || (schema.required ?? []).includes(name),
            schema: property,
          });
        }
      }
    }
    for (const name of pathNames) {
      if (!parameters.some((p) => p.in === "path" && p.name === name)) {
        parameters.push({ name, in: "path", required: true, schema: { type: "string" } });
      }
    }
    const responses: Json = {};
    for (const [status, description] of Object.entries(described?.responses ?? { 200: "OK" })) {
      responses[status] = Number(status) >= 400
        ? { description, content: ERROR_CONTENT }
        : { description };
    }
    const applies: Record<number, boolean> = {
      400: parameters.length > 0 || requestBody !== undefined,
      401: true,
      404: pathNames.length > 0,
      405: true,
      413: requestBody !== undefined,
      503: described?.database !== false,
    };
    for (const [status, { name }] of Object.entries(ERROR_RESPONSES)) {
      if (applies[Number(status)]) responses[status] ??= { $ref: `#/components/responses/${name}` };
    }
    responses["4XX"] ??= {
      description: 'Any other refusal: `{ "error": "…" }`',
      content: ERROR_CONTENT,
    };
    paths[openApiPath] ??= {};
    let operationId = described?.operationId ??
      operationIdOf(method, openApiPath.slice(prefix.length));
    // Unique, as the specification requires, whatever the paths are.
    for (let n = 2; ids.has(operationId); n++) {
      operationId = `${operationId.replace(/\d+$/, "")}${n}`;
    }
    ids.add(operationId);
    paths[openApiPath][method.toLowerCase()] = {
      operationId,
      ...(described ? { summary: described.summary } : {}),
      ...(described?.description ? { description: described.description } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(requestBody ? { requestBody } : {}),
      responses,
    };
  }
  return {
    openapi: "3.1.0",
    info,
    ...(servers.length ? { servers } : {}),
    paths,
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      responses: Object.fromEntries(
        Object.values(ERROR_RESPONSES).map(({ name, response }) => [name, response]),
      ),
      schemas: {
        Error: {
          type: "object",
          properties: { error: { type: "string" } },
          required: ["error"],
        },
      },
    },
  };
}
