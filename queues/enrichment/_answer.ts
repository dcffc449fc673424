/**
 * The enrichment provider's answer, read and checked: the response body as JSON or as an event
 * stream ({@linkcode readAnswer}), its token usage, and the model's content parsed into the
 * fields the prompt asks for and validated with zod ({@linkcode parseAnswer}). An answer that
 * cannot be used is a {@linkcode MalformedAnswerError}. The request itself and its retries are
 * _remote.ts.
 *
 * @module
 */
import { Stream } from "openai/streaming";
import { z } from "zod";

/** Tokens one request used, from the answer's `usage` (absent fields are 0). */
export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** The answer's schema: what the prompt asks for. */
export const remoteAnswer = z.object({
  summary: z.string().trim().min(1).max(4000),
  genres: z.array(z.string().trim().min(1).max(100)).max(20),
  audience: z.string().trim().min(1).max(200),
  content_warnings: z.array(z.string().trim().min(1).max(200)).max(50),
});

/**
 * The API answered, but not with what was asked: no content, no JSON object, or not the schema.
 * A permanent failure of this attempt (the same prompt gets the same kind of answer); the message
 * is readable by an operator, e.g. `Cannot use the enrichment answer: "genres": expected array`.
 */
export class MalformedAnswerError extends Error {
  override name = "MalformedAnswerError";
}

/** One answer as read: the message content, the model that answered, and its token usage. */
export type Answer = { content: string; model: string; usage: TokenUsage | null };

/**
 * Read an answer's body, whatever its content type: JSON (a chat.completion) or an event stream of
 * chat.completion.chunk objects, assembled with the SDK's own SSE decoder.
 *
 * @param response the chat-completions request's raw response.
 * @param signal aborts reading the stream.
 * @returns the content ("" when the answer has none), the model ("" when unnamed), the usage.
 * @throws {MalformedAnswerError} when a non-stream body is not JSON; `signal.reason` when it aborted.
 */
export async function readAnswer(response: Response, signal: AbortSignal): Promise<Answer> {
  const type = response.headers.get("content-type") ?? "";
  if (/text\/event-stream/i.test(type)) {
    const controller = new AbortController();
    signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
    let content = "";
    let model = "";
    let usage: TokenUsage | null = null;
    type Chunk = {
      model?: string;
      usage?: Partial<TokenUsage> | null;
      choices?: { delta?: { content?: string | null }; message?: { content?: string | null } }[];
    };
    for await (const chunk of Stream.fromSSEResponse<Chunk>(response, controller)) {
      const choice = chunk?.choices?.[0];
      content += choice?.delta?.content ?? choice?.message?.content ?? "";
      model ||= chunk?.model ?? "";
      if (chunk?.usage) usage = tokens(chunk.usage);
    }
    signal.throwIfAborted();
    return { content, model, usage };
  }
  const text = await response.text();
  let body: {
    model?: string;
    usage?: Partial<TokenUsage> | null;
    choices?: { message?: { content?: unknown } }[];
  };
  try {
    body = JSON.parse(text);
  } catch {
    throw new MalformedAnswerError(
      `Cannot use the enrichment answer: the response body is not JSON (${
        type || "no content type"
      }): ${JSON.stringify(preview(text))}`,
    );
  }
  const content = body?.choices?.[0]?.message?.content;
  return {
    content: typeof content === "string" ? content : "",
    model: typeof body?.model === "string" ? body.model : "",
    usage: body?.usage ? tokens(body.usage) : null,
  };
}

function tokens(usage: Partial<TokenUsage>): TokenUsage {
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);
  const prompt = n(usage.prompt_tokens);
  const completion = n(usage.completion_tokens);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: n(usage.total_tokens) || prompt + completion,
  };
}

function preview(text: string): string {
  const flat = text.trim();
  return flat.length > 80 ? `${flat.slice(0, 80)}…` : flat;
}

// Reasoning blocks some models put before (or around) the answer.
const REASONING = /<(think|thinking|reasoning)>[\s\S]*?<\/\1>/gi;
// An opened reasoning block that never closes: the answer was cut inside it.
const UNCLOSED = /<(think|thinking|reasoning)>/i;

/**
 * Parse the model's answer: the first JSON object in it — bare, in a Markdown code fence, or in
 * prose — once reasoning blocks (`<think>…</think>`, `<thinking>`, `<reasoning>`) are removed,
 * validated with {@linkcode remoteAnswer}.
 *
 * @param content the message content.
 * @returns the validated fields.
 * @throws {MalformedAnswerError} naming what is wrong (no JSON object, or the first schema issue).
 */
export function parseAnswer(content: string): z.infer<typeof remoteAnswer> {
  let text = content.replace(REASONING, " ");
  const open = UNCLOSED.exec(text);
  if (open) text = text.slice(0, open.index);
  const json = firstObject(text);
  if (json === undefined) {
    throw new MalformedAnswerError(
      `Cannot use the enrichment answer: it is not JSON (no JSON object in it): ${
        JSON.stringify(preview(text))
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

// The first balanced `{…}` span that parses as a JSON object (strings and escapes respected).
function firstObject(text: string): Record<string, unknown> | undefined {
  for (let start = text.indexOf("{"); start !== -1; start = text.indexOf("{", start + 1)) {
    let depth = 0;
    let inString = false;
    for (let i = start; i < text.length; i++) {
      const ch = text[i];
      if (inString) {
        if (ch === "\\") i++;
        else if (ch === '"') inString = false;
      } else if (ch === '"') {
        inString = true;
      } else if (ch === "{") {
        depth++;
      } else if (ch === "}" && --depth === 0) {
        try {
          const value = JSON.parse(text.slice(start, i + 1));
          if (value && typeof value === "object" && !Array.isArray(value)) return value;
        } catch { /* not JSON: try the next brace */ }
        break;
      }
    }
  }
  return undefined;
}
