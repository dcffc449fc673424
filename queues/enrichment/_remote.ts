/**
 * The OpenAI-compatible enrichment engine: one chat-completions call per queue attempt
 * asking for a short summary, genres, audience and content warnings as JSON, validated with zod.
 *
 * The client never retries by itself (`maxRetries: 0`): the queue's attempt is the only retry, so
 * a book is charged at most once per attempt (ADR-022: enrichment is a paid call; twice is double
 * spend). Each call carries the run's abort signal joined with its own timeout, and an idempotency
 * key `book-<id>-attempt-<n>`, so a provider that honours it never charges one attempt twice.
 *
 * @module
 */
import OpenAI from "openai";
import { z } from "zod";

/** The remote engine's settings (`ENRICHMENT_API_URL`, `ENRICHMENT_API_KEY`, `ENRICHMENT_MODEL`). */
export interface RemoteSettings {
  /** Base URL of the API, e.g. `https://api.openai.com/v1` (the client appends `/chat/completions`). */
  readonly url: string;
  /** Bearer key; some local servers need none. */
  readonly apiKey: string | undefined;
  readonly model: string;
  /** Longest one call may take, in ms. */
  readonly timeoutMs: number;
}

/** What the remote engine adds to the local metadata. */
export type RemoteMetadata = {
  summary: string;
  genres: string[];
  audience: string;
  content_warnings: string[];
  /** The model that answered. */
  model: string;
};

/** The answer's schema: what the prompt asks for. */
export const remoteAnswer = z.object({
  summary: z.string().trim().min(1).max(4000),
  genres: z.array(z.string().trim().min(1).max(100)).max(20),
  audience: z.string().trim().min(1).max(200),
  content_warnings: z.array(z.string().trim().min(1).max(200)).max(50),
});

/**
 * The API answered, but not with what was asked: no content, not JSON, or not the schema. A
 * permanent failure of this attempt (the same prompt gets the same kind of answer); the message is
 * readable by an operator, e.g. `Cannot use the enrichment answer: "genres": expected array`.
 */
export class MalformedAnswerError extends Error {
  override name = "MalformedAnswerError";
}

/** What the prompt says about the book. */
export interface BookExcerpt {
  /** User book id (bigint as string), for the idempotency key. */
  readonly bookId: string;
  /** The queue attempt this call belongs to (1, 2, 3), for the idempotency key. */
  readonly attempt: number;
  readonly title: string | null;
  readonly author: string | null;
  /** ISO 639-1, when known. */
  readonly language: string | null;
  /** The start of the book's text (the caller bounds its length). */
  readonly text: string;
}

/** The idempotency key of one attempt: `book-<id>-attempt-<n>`. */
export function idempotencyKey(bookId: string, attempt: number): string {
  return `book-${bookId}-attempt-${attempt}`;
}

/**
 * Build the client: no retries of its own, the call's timeout set per request.
 *
 * @param settings the remote engine's settings.
 */
export function createClient(settings: RemoteSettings): OpenAI {
  return new OpenAI({
    baseURL: settings.url,
    // The SDK refuses to start without a key; an OpenAI-compatible local server may need none.
    apiKey: settings.apiKey ?? "unused",
    maxRetries: 0,
    timeout: settings.timeoutMs,
  });
}

const SYSTEM =
  "You catalogue books for a reading app. Answer with one JSON object only, no prose: " +
  '{"summary": string (2-4 sentences), "genres": string[], "audience": string, ' +
  '"content_warnings": string[] (empty when none)}.';

/**
 * Ask the API for the book's summary, genres, audience and content warnings: one call.
 *
 * @param client from {@linkcode createClient}.
 * @param settings model and timeout (ms).
 * @param book what the prompt says, and the ids of the idempotency key.
 * @param signal the run's signal; the call aborts when it does or when the timeout passes.
 * @returns the validated answer.
 * @throws {MalformedAnswerError} when the answer is not the JSON asked for.
 * @throws the SDK's `APIError` subclasses (`status` set for an HTTP error), `APIUserAbortError`
 *   when `signal` aborted, `APIConnectionTimeoutError` on the timeout.
 */
export async function enrichRemotely(
  client: OpenAI,
  settings: RemoteSettings,
  book: BookExcerpt,
  signal: AbortSignal,
): Promise<RemoteMetadata> {
  const about = [
    `Title: ${book.title ?? "(unknown)"}`,
    `Author: ${book.author ?? "(unknown)"}`,
    `Language: ${book.language ?? "(unknown)"}`,
    "",
    book.text,
  ].join("\n");
  const completion = await client.chat.completions.create(
    {
      model: settings.model,
      messages: [{ role: "system", content: SYSTEM }, { role: "user", content: about }],
      temperature: 0.2,
    },
    {
      signal: AbortSignal.any([signal, AbortSignal.timeout(settings.timeoutMs)]),
      headers: { "Idempotency-Key": idempotencyKey(book.bookId, book.attempt) },
      maxRetries: 0,
    },
  );
  const content = completion.choices?.[0]?.message?.content;
  if (typeof content !== "string" || content.trim() === "") {
    throw new MalformedAnswerError("Cannot use the enrichment answer: it has no content");
  }
  return { ...parseAnswer(content), model: completion.model || settings.model };
}

/**
 * Parse the model's answer: a JSON object, bare or wrapped in a Markdown code fence (as many
 * models send it), that matches {@linkcode remoteAnswer}.
 *
 * @param content the message content.
 * @returns the validated fields.
 * @throws {MalformedAnswerError} naming what is wrong (not JSON, or the first schema issue).
 */
export function parseAnswer(content: string): z.infer<typeof remoteAnswer> {
  const fenced = /^\s*```[\w-]*\s*\n([\s\S]*?)\n?\s*```\s*$/.exec(content);
  const raw = (fenced ? fenced[1] : content).trim();
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    const preview = raw.length > 80 ? `${raw.slice(0, 80)}…` : raw;
    throw new MalformedAnswerError(
      `Cannot use the enrichment answer: it is not JSON (${(err as Error).message}): ${
        JSON.stringify(preview)
      }`,
    );
  }
  const parsed = remoteAnswer.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length > 0 ? `"${issue.path.map(String).join(".")}"` : "the answer";
    throw new MalformedAnswerError(`Cannot use the enrichment answer: ${where}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * Whether an error from {@linkcode enrichRemotely} will not go away by asking again: a malformed
 * answer, or an HTTP 4xx other than 408 (timeout), 409 (conflict) and 429 (rate limit) — a bad
 * key, an unknown model, a refused request.
 */
export function isPermanent(err: unknown): boolean {
  if (err instanceof MalformedAnswerError) return true;
  if (err instanceof OpenAI.APIError && typeof err.status === "number") {
    return err.status >= 400 && err.status < 500 && ![408, 409, 429].includes(err.status);
  }
  return false;
}
