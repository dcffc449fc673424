/**
 * The enrichment queue's metadata: what the local engine computes from a book's chapters
 * (_local.ts), merged with the remote engine's answer when it is on (_remote.ts), and the tally
 * of the tokens the remote requests used. The engines are loaded on the first run, not at
 * startup: their libraries (franc-min, iso-639-3, stopword, syllable; the openai SDK) hold about
 * 30 MB a worker that never enriches a book has no use for.
 *
 * @module
 */
import type { LocalMetadata } from "./_local.ts";
import type { RemoteMetadata } from "./_remote.ts";
import type { EnrichmentContext, EnrichmentJob } from "./mod.ts";
import { name } from "./_constants.ts";

/** Characters of the book's text sent to the remote engine. */
export const EXCERPT_CHARS = 12_000;

/** The metadata saved on `Completed`: the local fields, plus the remote ones when it ran. */
export type Metadata = LocalMetadata & Partial<RemoteMetadata> & {
  engine: "local" | "openai-compatible";
};

/** Tokens the remote engine's requests used, added up since start (the metric reads it). */
export interface TokenTally {
  prompt: number;
  completion: number;
  /** Requests answered with a `usage`. */
  requests: number;
}

/** This process's tally, read by the enrichment view's token counter (view.ts). */
export const tokensUsed: TokenTally = { prompt: 0, completion: 0, requests: 0 };

/**
 * A book's metadata: the local engine's from its chapters, then, when the remote engine is on,
 * the provider's answer merged over it (_remote.ts: its retries and waits happen inside this
 * call).
 *
 * @param keep given the local metadata as soon as it is computed, so a settle after a provider
 *   fault can save it.
 * @returns the metadata to save on `Completed`.
 * @throws the provider's fault (_remote.ts), or `signal.reason`.
 */
export async function enrich(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  signal: AbortSignal,
  keep: (local: Metadata) => void,
): Promise<Metadata> {
  const chapters = await ctx.sql<{ html: string }[]>`
    select html from user_chapters where user_book_id = ${job.id} order by position`;
  const { enrichLocally, htmlToText } = await import("./_local.ts");
  const computed = enrichLocally(chapters.map((c) => c.html), signal);
  const local: Metadata = { ...computed, engine: "local" };
  keep(local);
  if (!ctx.remote) return local;
  const { enrichRemotely } = await import("./_remote.ts");
  const tally = ctx.tokens ?? tokensUsed;
  const remote = await enrichRemotely(
    await ctx.remote.client(),
    ctx.remote.settings,
    {
      bookId: job.id,
      intent: job.intent,
      attempt: job.attempt_count,
      title: job.title,
      author: job.author,
      language: computed.language,
      text: excerpt(chapters.map((c) => c.html), htmlToText),
    },
    signal,
    {
      onUsage: (usage, model) => {
        tally.prompt += usage.prompt_tokens;
        tally.completion += usage.completion_tokens;
        tally.requests++;
        ctx.log.info({ queue: name, id: job.id, model, ...usage }, "enrichment tokens used");
      },
      onRetry: (err, waitMs, retry) =>
        ctx.log.warn(
          { queue: name, id: job.id, err: err.message, waitMs: Math.round(waitMs), retry },
          "enrichment request will be asked again",
        ),
    },
  );
  return { ...computed, ...remote, engine: "openai-compatible" };
}

function excerpt(chapters: string[], htmlToText: (html: string) => string): string {
  let text = "";
  for (const html of chapters) {
    if (text.length >= EXCERPT_CHARS) break;
    text += `${htmlToText(html)}\n`;
  }
  return text.slice(0, EXCERPT_CHARS);
}
