/**
 * The command line's side of the worker's HTTP API: its exit codes ({@linkcode EXIT}, cli/jobs.ts's
 * module comment says what each means), the {@linkcode CliError} that ends a command with one, the
 * bearer token, and one call with its answer's status turned into an exit code.
 *
 * @module
 */

/** Exit codes (cli/jobs.ts's module comment). */
export const EXIT = { ok: 0, refused: 1, usage: 2, notFound: 3, auth: 4, unreachable: 5 } as const;

/** A refusal that ends the command with an exit code and a message. */
export class CliError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

/**
 * The bearer token: `INTERNAL_API_TOKEN`, else the worker's generated token file
 * (`$DATA_DIR/internal_api_token`, `DATA_DIR` defaulting to `.data`).
 *
 * @param env the environment the command runs in.
 * @throws {CliError} (exit 4) when neither gives a token.
 */
export async function token(env: Readonly<Record<string, string | undefined>>): Promise<string> {
  if (env.INTERNAL_API_TOKEN) return env.INTERNAL_API_TOKEN;
  const path = `${env.DATA_DIR || ".data"}/internal_api_token`;
  try {
    const text = (await Deno.readTextFile(path)).trim();
    if (text) return text;
  } catch {
    // reported below
  }
  throw new CliError(
    `No token: set INTERNAL_API_TOKEN, or DATA_DIR to the worker's data directory (no token in "${path}")`,
    EXIT.auth,
  );
}

/** One API call's answer: its status and JSON body. */
export interface Answer {
  status: number;
  body: Record<string, unknown>;
}

function codeOf(status: number): number {
  if (status === 404) return EXIT.notFound;
  if (status === 401 || status === 403) return EXIT.auth;
  if (status >= 500) return EXIT.unreachable;
  return EXIT.refused;
}

/**
 * A caller of the worker's `/internal` routes at `base` with `bearer`.
 *
 * @returns `(method, path, body?)` → the answer; `path` is under `/internal`, `body` is sent as JSON.
 * @throws {CliError} with the API's `error` and the exit code of its status (a 4xx or 5xx), or
 *   exit 5 when the worker cannot be reached.
 */
export function api(base: string, bearer: string) {
  return async (method: string, path: string, body?: unknown): Promise<Answer> => {
    let res: Response;
    try {
      res = await fetch(`${base}/internal${path}`, {
        method,
        headers: {
          authorization: `Bearer ${bearer}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new CliError(
        `Cannot reach the worker at ${base}: ${err instanceof Error ? err.message : err}`,
        EXIT.unreachable,
      );
    }
    const text = await res.text();
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { error: text.slice(0, 200) };
    }
    if (res.status >= 400) {
      throw new CliError(String(parsed.error ?? `HTTP ${res.status}`), codeOf(res.status));
    }
    return { status: res.status, body: parsed };
  };
}
