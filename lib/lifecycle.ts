/**
 * Start/stop order, signals and the shutdown budget (docs/development.md).
 *
 * Shutdown runs its phases in order — stop claiming and give the running jobs back
 * (`consumers`), stop the in-process drains (`drains`), stop HTTP (`http`), close the database
 * (`db`) — each bounded by its share of one budget that starts at the first signal. A second
 * signal exits at once with a non-zero code. Nothing here waits past the budget.
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "./log.ts";

/** Shutdown phases, in the order they run. */
export type Phase = "consumers" | "drains" | "http" | "db";

const PHASES: readonly Phase[] = ["consumers", "drains", "http", "db"];
// The share of the budget by which each phase must be done. Consumers get most of it: a running
// job needs time to notice its abort signal and give its claim back.
const PHASE_END: Record<Phase, number> = { consumers: 0.7, drains: 0.85, http: 0.95, db: 1 };

/** A stop step: must settle by `deadline` (a `performance.now()` time in ms). */
export type StopStep = (deadline: number) => Promise<void>;

/** The same signal again within this many ms is one request delivered twice (see installSignals). */
const DUPLICATE_SIGNAL_MS = 100;

/** Exit code for "stopped by a second signal": 128 + SIGINT. */
export const FORCED_EXIT_CODE = 130;

/**
 * Exit code for "a job was left in flight": its give-back did not commit before the budget ran
 * out. The job ids are in the log; the queue's orphan recovery settles them at
 * the next lock acquisition.
 */
export const IN_FLIGHT_EXIT_CODE = 3;

/** Thrown by a stop step that left jobs in flight; the shutdown then exits {@linkcode IN_FLIGHT_EXIT_CODE}. */
export class InFlightError extends Error {
  override name = "InFlightError";
  /** Ids of the jobs left in flight. */
  readonly ids: readonly string[];

  /** A claim's reply was lost and could not be resolved: its job, if any, is in flight too. */
  readonly claimUnheard: boolean;

  /**
   * @param ids the jobs whose give-back never committed.
   * @param claimUnheard a claim whose reply was lost may have left one more, id unknown.
   */
  constructor(queue: string, ids: readonly string[], claimUnheard = false) {
    const unheard = "a claim whose reply was lost (its job, if the claim committed, stays in " +
      "flight until the next start recovers it)";
    super(
      ids.length === 0 && claimUnheard
        ? `Left ${unheard} on the ${queue} queue`
        : `Left ${ids.length} ${queue} job(s) in flight: ${ids.join(", ")}` +
          (claimUnheard ? `; and ${unheard}` : ""),
    );
    this.ids = ids;
    this.claimUnheard = claimUnheard;
  }
}

/**
 * The process lifetime: shutdown steps by phase, and the signals that start the shutdown.
 *
 * @example
 * const lifecycle = new Lifecycle(log, 5000);
 * lifecycle.installSignals();
 * lifecycle.onStop("db", "pool", () => sql.end({ timeout: 1 }));
 */
export class Lifecycle {
  readonly #log: Logger;
  readonly #budgetMs: number;
  readonly #steps = new Map<Phase, Map<string, StopStep>>(PHASES.map((p) => [p, new Map()]));
  readonly #stopping = new AbortController();
  #shutdown: Promise<number> | undefined;

  /**
   * @param budgetMs ms from the first signal to the end of the last phase.
   */
  constructor(log: Logger, budgetMs: number) {
    this.#log = log;
    this.#budgetMs = budgetMs;
  }

  /** Aborted as soon as shutdown starts; startup waits (e.g. for the database) listen to it. */
  get stopping(): AbortSignal {
    return this.#stopping.signal;
  }

  /**
   * Register a stop step; a second step with the same name in a phase replaces the first.
   *
   * @returns a function that unregisters the step (for short-lived owners such as a stream).
   */
  onStop(phase: Phase, name: string, step: StopStep): () => void {
    const steps = this.#steps.get(phase)!;
    steps.set(name, step);
    return () => {
      if (steps.get(name) === step) steps.delete(name);
    };
  }

  /**
   * SIGTERM, SIGINT or SIGHUP starts {@linkcode shutdown} and exits with its code; a second one exits at
   * once with {@linkcode FORCED_EXIT_CODE}. The same signal repeated within 100 ms counts once.
   */
  installSignals(): void {
    let first: { signal: Deno.Signal; at: number } | undefined;
    // SIGHUP too: a closed terminal must give the job back, not behave like a crash.
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
      Deno.addSignalListener(signal, () => {
        if (first) {
          // A terminal's Ctrl-C reaches us twice when we run under `deno task`: once through the
          // process group and once forwarded by the task runner, ~1 ms apart. That is one
          // request, not a second one.
          if (signal === first.signal && performance.now() - first.at < DUPLICATE_SIGNAL_MS) return;
          this.#log.warn({ signal }, "second signal; exiting now");
          Deno.exit(FORCED_EXIT_CODE);
        }
        first = { signal, at: performance.now() };
        this.#log.info({ signal, budgetMs: this.#budgetMs }, "shutting down");
        this.shutdown().then((code) => Deno.exit(code));
      });
    }
  }

  /**
   * Run every phase in order within the budget; idempotent.
   *
   * @returns the exit code: 0 when every step finished in time (every job settled or given back),
   *   {@linkcode IN_FLIGHT_EXIT_CODE} when a step left jobs in flight, 1 when a step failed or
   *   overran otherwise.
   */
  shutdown(): Promise<number> {
    this.#shutdown ??= this.#run();
    return this.#shutdown;
  }

  async #run(): Promise<number> {
    this.#stopping.abort(new Error("Shutting down"));
    const start = performance.now();
    let code = 0;
    for (const phase of PHASES) {
      const deadline = start + this.#budgetMs * PHASE_END[phase];
      const steps = [...this.#steps.get(phase)!.entries()];
      const results = await Promise.all(
        steps.map(([name, step]) => this.#bounded(name, step, deadline)),
      );
      if (results.includes("in-flight")) code = IN_FLIGHT_EXIT_CODE;
      else if (results.includes(false) && code === 0) code = 1;
    }
    this.#log.info({ ms: Math.round(performance.now() - start), code }, "shutdown complete");
    return code;
  }

  async #bounded(
    name: string,
    step: StopStep,
    deadline: number,
  ): Promise<boolean | "in-flight"> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), Math.max(0, deadline - performance.now()) + 50);
    });
    try {
      const outcome = await Promise.race([step(deadline).then(() => "done" as const), late]);
      if (outcome === "late") this.#log.error({ step: name }, "shutdown step overran its budget");
      return outcome === "done";
    } catch (err) {
      if (err instanceof InFlightError) return "in-flight";
      this.#log.error({ step: name, err }, "shutdown step failed");
      return false;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * Whether `promise` settles (either way) before `deadline`.
 *
 * @param deadline a `performance.now()` time in ms.
 * @returns true when it settled in time; false at the deadline (the promise is left running).
 * @example
 * if (!(await settlesBy(server.shutdown(), performance.now() + 1000))) log.warn("still open");
 */
export function settlesBy(promise: Promise<unknown>, deadline: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, deadline - performance.now()));
    promise.then(
      () => (clearTimeout(timer), resolve(true)),
      () => (clearTimeout(timer), resolve(true)),
    );
  });
}

/**
 * Wait until `probe` succeeds, retrying with capped exponential backoff and saying so in the log
 * (a database unreachable at startup must never crash-loop silently).
 *
 * @param what names the dependency in the log, e.g. `database`.
 * @param probe throws while the dependency is unreachable.
 * @param signal stops the wait (shutdown during startup).
 * @param isPermanent tells an error that retrying cannot fix (bad password, missing database).
 * @param maxDelayMs cap of the delay between attempts (default 5000 ms).
 * @returns true once the probe succeeded; false when `signal` aborted first.
 * @throws the probe's error when `isPermanent` says so.
 */
export async function waitUntilReachable(
  what: string,
  probe: () => Promise<unknown>,
  log: Logger,
  signal: AbortSignal,
  isPermanent: (err: unknown) => boolean = () => false,
  maxDelayMs = 5000,
): Promise<boolean> {
  for (let attempt = 1; !signal.aborted; attempt++) {
    try {
      await probe();
      if (attempt > 1) log.info({ what, attempt }, "dependency reachable");
      return true;
    } catch (err) {
      if (isPermanent(err)) throw err;
      const delayMs = Math.min(maxDelayMs, 250 * 2 ** (attempt - 1));
      log.warn({ what, attempt, delayMs, err: String(err) }, "dependency unreachable; retrying");
      await sleep(delayMs, undefined, { signal }).catch(() => {});
    }
  }
  return false;
}
