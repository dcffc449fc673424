/**
 * Process-level test helper: spawn `main.ts` for real, collect its JSON log lines, wait for one.
 *
 * @module
 */
import type { TestDb } from "./_db.ts";
import { dirname } from "node:path";
import { startArgs } from "../bench/_start_command.ts";

/** A spawned worker process. */
export interface WorkerProcess {
  child: Deno.ChildProcess;
  /** Every JSON log line so far. */
  logs: Array<Record<string, unknown>>;
  /** Wait for a log line with this `msg` (and matching fields); returns it. */
  waitForLog(
    msg: string,
    match?: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** The HTTP base URL, once "http listening" was logged. */
  baseUrl(): Promise<string>;
  /** Resolves with the exit status and the ms from `since` (default: spawn) to exit. */
  exited: Promise<Deno.CommandStatus>;
}

/**
 * Push each line of `stream` parsed as JSON (any other line as `{ msg: prefix + line }`) as it
 * arrives, calling `onLine` after each.
 */
export async function collectJsonLines(
  stream: ReadableStream<Uint8Array>,
  into: Array<Record<string, unknown>>,
  onLine: () => void = () => {},
  prefix = "",
): Promise<void> {
  let buffered = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      try {
        into.push(JSON.parse(line));
      } catch {
        into.push({ msg: `${prefix}${line}` });
      }
      onLine();
    }
  }
}

/** The token every spawned worker uses. */
export const TEST_TOKEN = "test-token-0123456789abcdef";

/**
 * Spawn the worker with the start task's command line (deno.json `start` of the checkout `main`
 * belongs to: its explicit permissions, so a permission the worker needs and the task lacks fails
 * the process tests) against a test schema. Its `DATA_DIR`, `STORAGE_DIR` and `SITE_DIR` are a
 * temporary directory of its own (removed once it exits) unless `env` names them, so no test
 * writes into the checkout's `.data/`.
 *
 * @param env extra or overriding variables.
 * @param runFlags extra `deno run` flags, e.g. `--import-map=…`.
 * @param main the entry point to run (default: this checkout's `main.ts`).
 * @param options `openFiles`: run under `sh -c 'ulimit -n <openFiles> && exec deno …'`.
 */
export function spawnWorker(
  db: TestDb | null,
  env: Record<string, string>,
  runFlags: string[] = [],
  main = new URL("../main.ts", import.meta.url).pathname,
  options: { openFiles?: number } = {},
): WorkerProcess {
  const scratch = Deno.makeTempDirSync({ prefix: "textstack-worker-" });
  const start = startArgs(dirname(main));
  const deno = [...start.slice(0, -1), ...runFlags, start.at(-1)!];
  const [command, args] = options.openFiles === undefined ? [Deno.execPath(), deno] : ["/bin/sh", [
    "-c",
    `ulimit -n ${options.openFiles} && exec "$0" "$@"`,
    Deno.execPath(),
    ...deno,
  ]];
  const child = new Deno.Command(command, {
    args,
    env: {
      ...(db ? { DATABASE_URL: db.url, DATABASE_SCHEMA: db.schema } : {}),
      DATA_DIR: `${scratch}/data`,
      STORAGE_DIR: `${scratch}/storage`,
      SITE_DIR: `${scratch}/site`,
      HOST: "127.0.0.1",
      PORT: "0",
      INTERNAL_API_TOKEN: TEST_TOKEN,
      POLL_INTERVAL_MS: "30000",
      SHUTDOWN_BUDGET_MS: "3000",
      STANDBY_RETRY_MS: "200",
      LOG_LEVEL: "info",
      ...env,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const logs: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  const wakeWaiters = () => waiters.forEach((w) => w());
  const pumps = Promise.all([
    collectJsonLines(child.stdout, logs, wakeWaiters),
    collectJsonLines(child.stderr, logs, wakeWaiters, "stderr: "),
  ]);
  const exited = Promise.all([child.status, pumps]).then(async ([status]) => {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
    for (const w of waiters) w();
    return status;
  });
  let exitedNow = false;
  exited.then(() => (exitedNow = true));

  async function waitForLog(
    msg: string,
    match: Record<string, unknown> = {},
    timeoutMs = 15_000,
  ): Promise<Record<string, unknown>> {
    const find = () =>
      logs.find((l) => l.msg === msg && Object.entries(match).every(([k, v]) => l[k] === v));
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = find();
      if (found) return found;
      if (exitedNow) {
        throw new Error(`Worker exited before logging "${msg}": ${JSON.stringify(logs)}`);
      }
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`Timed out waiting for log "${msg}": ${JSON.stringify(logs)}`);
      await new Promise<void>((resolve) => {
        const done = () => (clearTimeout(timer), waiters.delete(done), resolve());
        const timer = setTimeout(done, left);
        waiters.add(done);
      });
    }
  }

  return {
    child,
    logs,
    waitForLog,
    async baseUrl() {
      const line = await waitForLog("http listening");
      return `http://127.0.0.1:${line.port}`;
    },
    exited,
  };
}

/** POST JSON to the worker's API with the test token. */
export async function postJson(url: string, body: unknown): Promise<Response> {
  return await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}
