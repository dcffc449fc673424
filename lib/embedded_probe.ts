/**
 * What runs on an embedded data directory, asked of the server itself (lib/embedded.ts): the
 * port its `postmaster.pid` names and whether a server answers there, and how many other client
 * sessions it has. "Running" means "answers on that port", never "the pid in postmaster.pid is
 * alive": after a container restart that pid often belongs to an unrelated process.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import postgres from "postgres";

export const USER = "postgres";

export const PASSWORD = "postgres";

export const PROBE_TIMEOUT_S = 2;

/**
 * How long a start waits for the server, s: crash recovery after a SIGKILLed server can take a
 * while.
 */
export const START_TIMEOUT_S = 60;
// A client that has just closed its connection can stay in pg_stat_activity for a few ms while
// its backend exits; the worker's own pool closes right before stop(), so recount for a moment.
const LINGER_MS = 250;

/** What postmaster.pid says: line 1 the postmaster's pid, line 4 its port. */
export interface PidFile {
  pid: number;
  port: number;
}

export function urlFor(port: number): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Reject with "timed out" when `promise` is not settled after `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Run `fn` on a short-lived single connection to the server on `port`, bounded in time. */
export async function withClient<T>(
  port: number,
  fn: (sql: postgres.Sql) => Promise<T>,
): Promise<T> {
  const sql = postgres(urlFor(port), {
    max: 1,
    connect_timeout: PROBE_TIMEOUT_S,
    onnotice: () => {},
    connection: { application_name: "textstack-embedded", statement_timeout: 2000 },
  });
  try {
    return await within(fn(sql), (PROBE_TIMEOUT_S + 2) * 1000, `Querying 127.0.0.1:${port}`);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

export async function readPidFile(dir: string): Promise<PidFile | undefined> {
  try {
    const lines = (await Deno.readTextFile(`${dir}/postmaster.pid`)).split("\n");
    return { pid: Number(lines[0]), port: Number(lines[3]) };
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** Whether `pid` is a postmaster of `dir` (Linux): the postmaster chdir()s into its data dir. */
export async function isPostmasterOf(pid: number, dir: string): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    return await Deno.readLink(`/proc/${pid}/cwd`) === await Deno.realPath(dir);
  } catch {
    return false; // gone, or not ours to inspect (so not a server we started)
  }
}

/** `undefined` when the server on `port` answers a query, else the error that says why not. */
export async function probe(port: number): Promise<unknown> {
  if (!Number.isInteger(port) || port <= 0) return new Error(`invalid port "${port}"`);
  try {
    await withClient(port, (sql) => sql`select 1`);
    return undefined;
  } catch (err) {
    return err;
  }
}

/**
 * The port of the server running in `dir`, or `undefined` when none is (a stale postmaster.pid
 * is removed on the way). A server that does not answer yet but is this directory's postmaster
 * (starting up, recovering, or shutting down) is waited for, up to the start timeout.
 */
export async function runningPort(
  dir: string,
  note: (line: string) => void,
): Promise<number | undefined> {
  const deadline = performance.now() + START_TIMEOUT_S * 1000;
  for (;;) {
    const file = await readPidFile(dir);
    if (!file) return undefined;
    const err = await probe(file.port);
    if (err === undefined) return file.port;
    const why = errorText(err);
    // A server that answers with an error other than "not yet" (57P03: starting up, in recovery,
    // shutting down) is running but unusable, e.g. a wrong password: waiting will not help.
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && code !== "57P03") {
      throw new Error(`the server already running there on port ${file.port} refused us: ${why}`);
    }
    if (!(await isPostmasterOf(file.pid, dir))) {
      await Deno.remove(`${dir}/postmaster.pid`).catch((err) => {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
      });
      note(
        `Removed a stale postmaster.pid from "${dir}": pid ${file.pid} is not its server and ` +
          `port ${file.port} does not answer: ${why}`,
      );
      return undefined;
    }
    if (performance.now() > deadline) {
      throw new Error(
        `the server already running there (pid ${file.pid}) did not answer on port ` +
          `${file.port} within ${START_TIMEOUT_S} s: ${why}`,
      );
    }
    await sleep(100);
  }
}

/** Client sessions other than ours, recounted for up to {@linkcode LINGER_MS} while any remain. */
export function otherSessions(port: number): Promise<number> {
  return withClient(port, async (sql) => {
    const deadline = performance.now() + LINGER_MS;
    for (;;) {
      const [{ n }] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where backend_type = 'client backend' and pid <> pg_backend_pid()`;
      if (n === 0 || performance.now() >= deadline) return n;
      await sleep(25);
    }
  });
}
