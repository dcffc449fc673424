/**
 * The API as the route tests build it (tests/lib/http/api_test.ts, openapi_test.ts, ssg_routes_test.ts,
 * user_books_api_test.ts).
 *
 * @module
 */
import type { Hono } from "hono";
import { type ApiDeps, createApi } from "../lib/http/api.ts";
import type { EventHub } from "../lib/events.ts";
import { Lifecycle } from "../lib/lifecycle.ts";
import type { Logger } from "../lib/log.ts";
import type { Sql } from "../lib/db.ts";
import { QueueControl } from "../lib/control.ts";

/**
 * `createApi()` with the test's token and routes, a 2 s shutdown budget and a health check that
 * always answers `{}`; `deps` adds or overrides any other dependency.
 */
export function testApi(
  ctx: { log: Logger; events: EventHub },
  token: string,
  deps: Pick<ApiDeps, "routes"> & Partial<ApiDeps>,
): Hono {
  return createApi({
    token,
    log: ctx.log,
    events: ctx.events,
    lifecycle: new Lifecycle(ctx.log, 2000),
    health: () => Promise.resolve({}),
    ...deps,
  });
}

/**
 * A {@linkcode QueueControl} on the test's pool for route builders that take one: its cancel
 * requests go to `<schema>.queue_control`, which only a test that listens there receives.
 *
 * @param schema the test schema (the channel's prefix); `test` when the test sends no cancel.
 */
export function testControl(
  ctx: { sql: Sql; log: Logger },
  schema = "test",
): QueueControl {
  return new QueueControl({ sql: ctx.sql, schema, log: ctx.log });
}
