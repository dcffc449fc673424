/**
 * The OpenAI-compatible enrichment engine: one chat-completions request per queue attempt asking
 * for a short summary, genres, audience and content warnings as JSON, validated with zod, behind
 * a retry layer shaped like the SDKs' own (openai-node `retryRequest`), run here so its waits are
 * bounded and abortable. docs/enrichment.md says what a deployment can rely on.
 *
 * - Inside one run, a 408, 409, 429, 5xx, a connection error or a timeout is asked again, up to
 *   `maxRetries` times, after the wait the answer asked for (`retry-after-ms`, else `Retry-After`
 *   in seconds or as an HTTP date; `x-should-retry` is obeyed) or else an exponential backoff
 *   with jitter (0.5 s doubling to 8 s, up to 25 % less). The wait aborts with the run's signal, so
 *   a shutdown during it gives the job back as any shutdown does.
 * - A wait asked for beyond `retryAfterMaxMs` is not waited: {@linkcode WaitTooLongError} ends the
 *   attempt with the provider's reason and the wait it asked for (the queue makes the job due
 *   again only then).
 * - Every request of one attempt carries the same `Idempotency-Key`
 *   (`book-<id>-<intent>-attempt-<n>`): a provider that keeps keyed answers charges an attempt once.
 *   The intent is a uuid on the book's row, new for every admin retry, so a retried book never gets
 *   the stored answer of the attempt that failed.
 * - The SDK never retries by itself (`maxRetries: 0`) and its own timeout is set past ours: a
 *   timeout is {@linkcode TimeoutError}, "timed out after N ms".
 * - The answer is read whatever its content type: JSON, or a `text/event-stream` of chunks (some
 *   servers stream when not asked), assembled with the SDK's own SSE decoder (_answer.ts, which
 *   also parses and validates it).
 *
 * @module
 */
import OpenAI from "openai";
import { setTimeout as sleep } from "node:timers/promises";
import { MalformedAnswerError, parseAnswer, readAnswer, type TokenUsage } from "./_answer.ts";

/**
 * The remote engine's settings (`ENRICHMENT_API_URL`, `ENRICHMENT_API_KEY`, `ENRICHMENT_MODEL`,
 * `ENRICHMENT_API_TIMEOUT_MS`, `ENRICHMENT_API_MAX_RETRIES`, `ENRICHMENT_RETRY_AFTER_MAX_MS`).
 */
export interface RemoteSettings {
  /** Base URL of the API, e.g. `https://api.openai.com/v1` (the client appends `/chat/completions`). */
  readonly url: string;
  /** Bearer key; some local servers need none. */
  readonly apiKey: string | undefined;
  readonly model: string;
  /** Longest one request may take, answer body included, in ms. */
  readonly timeoutMs: number;
  /** Requests asked again inside one run after a transient fault (default 2: three in all). */
  readonly maxRetries?: number;
  /** Longest wait a `Retry-After` may ask for inside a run, in ms (default 120 000). */
  readonly retryAfterMaxMs?: number;
  /** First backoff step, in ms (default 500; doubles per retry up to 16 times it). */
  readonly backoffMs?: number;
}

/** Defaults of the optional {@linkcode RemoteSettings}. */
export const REMOTE_DEFAULTS = { maxRetries: 2, retryAfterMaxMs: 120_000, backoffMs: 500 };

/** What the remote engine adds to the local metadata. */
export type RemoteMetadata = {
  summary: string;
  genres: string[];
  audience: string;
  content_warnings: string[];
  /** The model that answered. */
  model: string;
};

/** One request took longer than `timeoutMs`: "… timed out after N ms". Transient. */
export class TimeoutError extends Error {
  override name = "EnrichmentTimeoutError";
}

/**
 * The API asked to wait longer than `retryAfterMaxMs`: the attempt ends (transient) with the
 * provider's reason; `waitMs` is how long it asked for.
 */
export class WaitTooLongError extends Error {
  override name = "WaitTooLongError";
  constructor(message: string, readonly waitMs: number) {
    super(message);
  }
}

/** What the prompt says about the book. */
export interface BookExcerpt {
  /** User book id (bigint as string), for the idempotency key. */
  readonly bookId: string;
  /** The intent's uuid (new at every admin retry), for the idempotency key. */
  readonly intent: string;
  /** The queue attempt this call belongs to (1, 2, 3), for the idempotency key. */
  readonly attempt: number;
  readonly title: string | null;
  readonly author: string | null;
  /** ISO 639-1, when known. */
  readonly language: string | null;
  /** The start of the book's text (the caller bounds its length). */
  readonly text: string;
}

/** What one run's requests report as they go (logs and metrics). */
export interface RemoteHooks {
  /** Each answered request's token usage. */
  onUsage?(usage: TokenUsage, model: string): void;
  /** Each transient fault about to be asked again, with the wait before it (ms). */
  onRetry?(err: Error, waitMs: number, retry: number): void;
}

/** The idempotency key of one attempt of one intent: `book-<id>-<intent>-attempt-<n>`. */
export function idempotencyKey(bookId: string, intent: string, attempt: number): string {
  return `book-${bookId}-${intent}-attempt-${attempt}`;
}

/**
 * Build the client: no retries of its own; its timeout is left past ours (ours names the ms).
 *
 * @param settings the remote engine's settings.
 */
export function createClient(settings: RemoteSettings): OpenAI {
  return new OpenAI({
    baseURL: settings.url,
    // The SDK refuses to start without a key; an OpenAI-compatible local server may need none.
    apiKey: settings.apiKey ?? "unused",
    maxRetries: 0,
    timeout: settings.timeoutMs + 60_000,
  });
}

const SYSTEM =
  "You catalogue books for a reading app. Answer with one JSON object only, no prose: " +
  '{"summary": string (2-4 sentences), "genres": string[], "audience": string, ' +
  '"content_warnings": string[] (empty when none)}.';

/**
 * Ask the API for the book's summary, genres, audience and content warnings, asking again after
 * transient faults as the module says.
 *
 * @param client from {@linkcode createClient}.
 * @param settings model, timeout (ms), retries and the wait bound.
 * @param book what the prompt says, and the ids of the idempotency key.
 * @param signal the run's signal: it aborts a request and a wait alike.
 * @returns the validated answer.
 * @throws `signal.reason` when it aborted; {@linkcode MalformedAnswerError}; an HTTP 4xx
 *   `APIError` that is not asked again; the last transient fault once `maxRetries` are spent
 *   ({@linkcode TimeoutError}, an `APIError`, `APIConnectionError`); {@linkcode WaitTooLongError}.
 */
export async function enrichRemotely(
  client: OpenAI,
  settings: RemoteSettings,
  book: BookExcerpt,
  signal: AbortSignal,
  hooks: RemoteHooks = {},
): Promise<RemoteMetadata> {
  const maxRetries = settings.maxRetries ?? REMOTE_DEFAULTS.maxRetries;
  const waitMax = settings.retryAfterMaxMs ?? REMOTE_DEFAULTS.retryAfterMaxMs;
  for (let retry = 0;; retry++) {
    let err: Error;
    try {
      return await requestOnce(client, settings, book, signal, hooks);
    } catch (caught) {
      if (signal.aborted) throw signal.reason;
      err = caught as Error;
    }
    if (!isTransient(err)) throw err;
    const asked = askedWaitMs(err);
    if (asked !== null && asked > waitMax) {
      throw new WaitTooLongError(
        `${describe(err)}; it asked to wait ${Math.round(asked)} ms, more than ` +
          `ENRICHMENT_RETRY_AFTER_MAX_MS (${waitMax} ms)`,
        asked,
      );
    }
    if (retry >= maxRetries) throw err;
    const wait = asked ?? backoffMs(retry + 1, settings.backoffMs ?? REMOTE_DEFAULTS.backoffMs);
    hooks.onRetry?.(err, wait, retry + 1);
    try {
      await sleep(wait, undefined, { signal });
    } catch {
      throw signal.reason;
    }
  }
}

/**
 * The backoff before retry `n` (1, 2, …): `base` doubling per retry, capped at 16 × `base`, minus
 * up to 25 % jitter (openai-node's `calculateDefaultRetryTimeoutMillis`, with its 0.5 s and 8 s).
 */
export function backoffMs(n: number, base: number = REMOTE_DEFAULTS.backoffMs): number {
  return Math.min(base * 2 ** (n - 1), base * 16) * (1 - Math.random() * 0.25);
}

/**
 * The wait an error's answer asked for, in ms: `retry-after-ms`, else `Retry-After` (seconds, or
 * an HTTP date); null when it asked for none (or for a negative or unreadable one).
 */
export function askedWaitMs(err: unknown): number | null {
  const headers = err instanceof OpenAI.APIError ? err.headers : undefined;
  if (!headers) return null;
  const ms = headers.get("retry-after-ms");
  if (ms && Number.isFinite(Number.parseFloat(ms)) && Number.parseFloat(ms) >= 0) {
    return Number.parseFloat(ms);
  }
  const after = headers.get("retry-after");
  if (!after) return null;
  const seconds = /^\s*\d+(\.\d+)?\s*$/.test(after) ? Number.parseFloat(after) * 1000 : null;
  const wait = seconds ?? Date.parse(after) - Date.now();
  return Number.isFinite(wait) ? Math.max(0, wait) : null;
}

/**
 * Whether a request's fault may pass by asking again (the SDKs' rule): `x-should-retry` when the
 * answer says; else 408, 409, 429, 5xx, a timeout, a connection that failed.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof TimeoutError) return true;
  if (err instanceof MalformedAnswerError || err instanceof WaitTooLongError) return false;
  if (err instanceof OpenAI.APIUserAbortError) return false;
  if (err instanceof OpenAI.APIError && typeof err.status === "number") {
    const says = err.headers?.get("x-should-retry");
    if (says === "true") return true;
    if (says === "false") return false;
    return [408, 409, 429].includes(err.status) || err.status >= 500;
  }
  // APIConnectionError (status undefined): refused, reset, DNS.
  return err instanceof OpenAI.APIError;
}

/**
 * Whether an error from {@linkcode enrichRemotely} will not go away in a later attempt: a
 * malformed answer, or an HTTP 4xx other than 408 (timeout), 409 (conflict) and 429 (rate limit)
 * — a bad key, an unknown model, a refused request.
 */
export function isPermanent(err: unknown): boolean {
  if (err instanceof MalformedAnswerError) return true;
  if (err instanceof OpenAI.APIError && typeof err.status === "number") {
    return err.status >= 400 && err.status < 500 && ![408, 409, 429].includes(err.status);
  }
  return false;
}

// An operator's line for a fault: the status and the provider's own message.
function describe(err: Error): string {
  if (err instanceof OpenAI.APIError && typeof err.status === "number") {
    return `the enrichment API answered ${err.status}: ${err.message}`;
  }
  return err.message;
}

// One request, its answer body read in full, within settings.timeoutMs.
async function requestOnce(
  client: OpenAI,
  settings: RemoteSettings,
  book: BookExcerpt,
  signal: AbortSignal,
  hooks: RemoteHooks,
): Promise<RemoteMetadata> {
  const about = [
    `Title: ${book.title ?? "(unknown)"}`,
    `Author: ${book.author ?? "(unknown)"}`,
    `Language: ${book.language ?? "(unknown)"}`,
    "",
    book.text,
  ].join("\n");
  const timer = new AbortController();
  const timeout = setTimeout(
    () =>
      timer.abort(new TimeoutError(`the enrichment API timed out after ${settings.timeoutMs} ms`)),
    settings.timeoutMs,
  );
  const joined = AbortSignal.any([signal, timer.signal]);
  try {
    const response = await client.chat.completions.create(
      {
        model: settings.model,
        messages: [{ role: "system", content: SYSTEM }, { role: "user", content: about }],
        temperature: 0.2,
      },
      {
        signal: joined,
        headers: {
          "Idempotency-Key": idempotencyKey(book.bookId, book.intent, book.attempt),
        },
        maxRetries: 0,
      },
    ).asResponse();
    const answer = await readAnswer(response, joined);
    const model = answer.model || settings.model;
    if (answer.usage) hooks.onUsage?.(answer.usage, model);
    if (answer.content.trim() === "") {
      throw new MalformedAnswerError("Cannot use the enrichment answer: it has no content");
    }
    return { ...parseAnswer(answer.content), model };
  } catch (err) {
    if (timer.signal.aborted && !signal.aborted) throw timer.signal.reason;
    if (err instanceof OpenAI.APIConnectionTimeoutError) {
      throw new TimeoutError(`the enrichment API timed out after ${settings.timeoutMs} ms`);
    }
    throw err;
  } finally {
    clearTimeout(timeout);
  }
}
