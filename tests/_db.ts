/**
 * Test database access: each test file gets its own schema on the test server (`DATABASE_URL`,
 * set by tests/_run.ts to the embedded default when the user gave none), migrated from `sql/`.
 *
 * @module
 */
import { connect, guardDriverCloseCrash, type Sql } from "../lib/db.ts";
import { createLogger } from "../lib/log.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import { skipNote, type Tool } from "./_requires.ts";

// The tests terminate backends on purpose; like main.ts, they must survive the driver's known
// crash on a closed connection (see guardDriverCloseCrash).
guardDriverCloseCrash(createLogger("silent"));

/** A migrated, private schema for one test file. */
export interface TestDb {
  /** `postgres://` URL of the test server. */
  url: string;
  /** The schema's name, e.g. `t_ingestion_4f2a`. */
  schema: string;
  /**
   * The pool's `application_name`, unique to this schema (the schema's name), so a test that
   * looks up backends in `pg_stat_activity` finds only its own, never another run's on the server.
   */
  applicationName: string;
  /** A pool whose search_path is the schema. */
  sql: Sql;
  /** Drop the schema and close the pool. */
  close(): Promise<void>;
}

/** The URL of the test server; throws when the tests were not started through tests/_run.ts. */
export function testUrl(): string {
  const url = Deno.env.get("DATABASE_URL");
  if (!url) throw new Error("DATABASE_URL is unset: run the tests with `deno task test`");
  return url;
}

/**
 * Create and migrate a fresh schema.
 *
 * @param name a short lower-case tag, usually the test file's subject.
 */
export async function createTestDb(name: string): Promise<TestDb> {
  const url = testUrl();
  const schema = `t_${name}_${crypto.randomUUID().slice(0, 8)}`;
  const applicationName = schema;
  const sql = connect(url, { schema, applicationName, max: 4 });
  await migrate(
    sql,
    schema,
    await readMigrations(new URL("../sql/", import.meta.url)),
    createLogger("silent"),
  );
  return {
    url,
    schema,
    applicationName,
    sql,
    async close() {
      await sql`drop schema if exists ${sql(schema)} cascade`;
      await sql.end({ timeout: 1 });
    },
  };
}

/**
 * Wait until `check` returns a truthy value, polling every `everyMs`.
 *
 * @returns the truthy value.
 * @throws Error naming `what` when `timeoutMs` passes first.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 5000,
  everyMs = 10,
): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Settle with `promise`, or fail once `timeoutMs` passes: for a wait that has no deadline of its
 * own (a statement that may block, a run that may hang), so a regression fails fast and says what
 * it was waiting for instead of hanging until the suite's timeout. The default (30 s) is far above
 * a slow machine's latency and far below the mutation check's 5 min per run.
 *
 * @returns what `promise` resolved with.
 * @throws Error naming `what` when `timeoutMs` passes first; whatever `promise` rejected with.
 */
export async function within<T>(
  what: string,
  promise: Promise<T>,
  timeoutMs = 30_000,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `Deno.test` with a fresh migrated schema for the test, dropped afterwards.
 *
 * @param name the test's name: the symbol and its behaviour.
 * @param options `knownFailure`: why the test is skipped for now (it then runs as ignored);
 *   `requires`: the system packages it needs (tests/_requires.ts: ignored where one is missing,
 *   outside CI).
 */
export function dbTest(
  name: string,
  fn: (db: TestDb) => Promise<void>,
  options: { knownFailure?: string; requires?: readonly Tool[] } = {},
): void {
  // A known failure is reported as ignored (never as passed), with the reason in its name, so
  // it stays visible in every run until it is fixed.
  const skip = skipNote(options.requires ?? []);
  const label = options.knownFailure
    ? `${name} [KNOWN FAILURE: ${options.knownFailure}]`
    : skip
    ? `${name} [skipped: ${skip}]`
    : name;
  Deno.test({
    name: label,
    ignore: options.knownFailure !== undefined || skip !== null,
    fn: async () => {
      const db = await createTestDb("t");
      try {
        await fn(db);
      } finally {
        await db.close();
      }
    },
  });
}
