/**
 * The process logger: JSON lines on stdout through pino, one fixed `msg` per event and the data in
 * fields (docs/development.md). Never log tokens or payload bodies; every line is redacted on its
 * way out (lib/redact.ts) all the same.
 *
 * @module
 */
import { pino } from "pino";
import { redact } from "./redact.ts";

/** A structured logger: `log.info({ queue, id }, "job completed")`. */
export type Logger = pino.Logger;

/**
 * Create the process logger.
 *
 * @param level pino level name (`"info"`, `"debug"`, `"silent"`, …); default `"info"`.
 * @returns a pino logger writing JSON lines to stdout, synchronously.
 * @example
 * const log = createLogger("info");
 * log.info({ queue: "ingestion" }, "consumer started");
 */
export function createLogger(level = "info"): Logger {
  // Synchronous writes: the lifecycle calls Deno.exit right after its last log line, and a
  // buffered line would be lost with the process.
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      // Every line, as written: no field, message or error stack carries a credential out.
      hooks: { streamWrite: redact },
    },
    pino.destination({ dest: 1, sync: true }),
  );
}
