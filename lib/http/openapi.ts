/**
 * What the OpenAPI 3.1 description of the API is generated from: the zod schemas that validate
 * the requests, so the document cannot drift from the checks.
 *
 * {@linkcode zValidator} is `@hono/zod-validator`'s own, with the same call shape and hook; it
 * also records its target and schema on the middleware. {@linkcode describeRoute} adds a summary
 * and the responses. The document itself is built from these records by lib/http/openapi_document.ts,
 * which is loaded on the first `GET /internal/openapi.json` (the routes need
 * only the records at startup).
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { zValidator as zodValidator } from "@hono/zod-validator";
import { z } from "zod";

/** The property a recording middleware carries its {@linkcode Recorded} under. */
export const RECORD: unique symbol = Symbol.for("textstack.openapi");

/** What {@linkcode describeRoute} records. */
export interface RouteDescription {
  summary: string;
  /**
   * The operation's id, for a generated client's method name; when absent it is derived from the
   * method and path (lib/http/openapi_document.ts `operationIdOf`).
   */
  operationId?: string;
  description?: string;
  /** Status code → what it means, e.g. `{ 201: "The job, Queued", 404: "No such job" }`. */
  responses: Record<number, string>;
  /**
   * Request bodies by content type, for a route that validates its body by hand rather than with
   * {@linkcode zValidator} — pass the very schema it parses with.
   */
  body?: Record<string, z.ZodType>;
  /** The body may be left out (e.g. a claim with its defaults). */
  optionalBody?: boolean;
  /** `false` for a route that never touches the database: it has no 503 "database unavailable". */
  database?: boolean;
}

/** What a route's middleware records for the document. */
export type Recorded =
  | { kind: "validate"; target: string; schema: z.ZodType }
  | { kind: "describe"; route: RouteDescription };

/**
 * `@hono/zod-validator`'s `zValidator`, recording its schema for the document (lib/http/openapi_document.ts).
 * A drop-in: change only the import.
 *
 * @example
 * app.get("/jobs/:id", zValidator("param", z.object({ id })), (c) => c.json(c.req.valid("param")));
 */
export const zValidator: typeof zodValidator = ((
  ...args: Parameters<typeof zodValidator>
) => {
  const middleware = (zodValidator as (...a: unknown[]) => MiddlewareHandler)(...args);
  const recorded: Recorded = { kind: "validate", target: args[0], schema: args[1] as z.ZodType };
  return Object.assign(middleware, { [RECORD]: recorded });
}) as typeof zodValidator;

/**
 * A pass-through middleware carrying a route's summary and responses for the document.
 *
 * @example
 * app.post("/jobs/:id/retry", describeRoute({ summary: "Retry", responses: { 200: "…" } }), h);
 */
export function describeRoute(route: RouteDescription): MiddlewareHandler {
  const middleware: MiddlewareHandler = async (_c, next) => await next();
  const recorded: Recorded = { kind: "describe", route };
  return Object.assign(middleware, { [RECORD]: recorded });
}
