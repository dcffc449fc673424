/**
 * The metadata enrichment queue: the `metadata_enrichment_*` columns of `user_books`
 * (sql/005_enrichment.sql), consumed by this process's one enrichment consumer (lib/consumer.ts).
 * A book enters it when user ingestion saves it `Ready` (same commit); that statement's NOTIFY on
 * `<schema>.user_books` wakes the consumer — nothing starts a run inline (ADR-022).
 *
 * Transitions (ADR-022 row 3):
 * - Pending → Running: {@linkcode claim} (counts the attempt, stamps the claim's boot id).
 * - Running → Completed: {@linkcode run}, saving the metadata (local engine always, remote when
 *   `ENRICHMENT_API_URL` is set).
 * - Running → Failed: {@linkcode run} for a permanent fault (a malformed answer, an HTTP 4xx), or
 *   any fault at the attempts cap.
 * - Running → Pending: {@linkcode run} for a transient fault under the cap (attempt spent; when
 *   the provider asked to wait longer than a run waits, not claimed again before that wait has
 *   passed: `metadata_enrichment_run_after`, {@linkcode nextDueMs}); {@linkcode giveBack} on
 *   shutdown (attempt not counted, no error), also during a provider's wait.
 * - Running (stale) → Pending, or → Failed at the cap: {@linkcode recover}, on every wake.
 * - Running (orphaned) → Pending / Failed: {@linkcode recoverOrphans}, once each time the consumer
 *   takes the queue lock.
 * - Failed → Pending: {@linkcode retry}, the admin retry (attempts reset, error cleared);
 *   {@linkcode bulkRetry} for every `Failed` book matching a filter, in one statement.
 * - Pending → Failed: {@linkcode cancel}, the admin cancel (error `cancelled by admin`); a
 *   `Running` book's run is stopped first and settled by {@linkcode cancelRun} (fenced).
 *
 * The admin retry gives the book a new intent for the Idempotency-Key. The local metadata is saved
 * by every settle of a run that computed it, the provider's fault included (docs/enrichment.md).
 *
 * Stale rule: `Running` started more than `staleAfterMs` ago (default 10 min) → `Pending`, the
 * attempt spent. Beyond the ADR: at {@linkcode MAX_ATTEMPTS} it is `Failed` instead, so
 * one book can never loop on paid calls.
 *
 * @module
 */
import type OpenAI from "openai";
import { ConfigError, type QueueDefaults } from "../../lib/config.ts";
import { type Fragment, transaction, type TxSql } from "../../lib/db.ts";
import type { JobEvent } from "../../lib/events.ts";
import {
  CANCELLED,
  type ClaimedJob,
  isRunTimeout,
  type OrphanScope,
  type QueueContext,
  settleClaim,
} from "../../lib/queue.ts";
// The engines are loaded on the first run, not at startup: their libraries
// (franc-min, iso-639-3, stopword, syllable; the openai SDK) hold about 30 MB a worker that never
// enriches a book has no use for.
import type { LocalMetadata } from "./_local.ts";
import type { RemoteMetadata, RemoteSettings } from "./_remote.ts";
import { jobError } from "../../lib/job_error.ts";

/** Queue name used in logs, events and the lock key. */
export const name = "enrichment";
/** The queue's table; NOTIFY channel `<schema>.user_books`. */
export const table = "user_books";
/**
 * Settings: `ENRICHMENT_STALE_AFTER_MS` (default 10 min, ADR-022 row 3) and
 * `ENRICHMENT_TIMEOUT_MS` (default 3 min: one remote call plus the local counts).
 */
export const defaults: QueueDefaults = {
  envPrefix: "ENRICHMENT",
  staleAfterMs: 600_000,
  timeoutMs: 180_000,
};
/** Attempts before enrichment is `Failed` for good. */
export const MAX_ATTEMPTS = 3;
/** Characters of the book's text sent to the remote engine. */
export const EXCERPT_CHARS = 12_000;

/** Statuses of `user_books.metadata_enrichment_status`. */
export type EnrichmentStatus = "Pending" | "Running" | "Completed" | "Failed";

/** The remote engine, when `ENRICHMENT_API_URL` is set. */
export interface RemoteEngine {
  /** The SDK client, built (and the SDK loaded) on first use. */
  client(): Promise<OpenAI>;
  readonly settings: RemoteSettings;
}

/** What this queue's verbs need beyond {@linkcode QueueContext}. */
export interface EnrichmentContext extends QueueContext {
  /** A Running row started longer ago than this (ms) is stale. */
  readonly staleAfterMs: number;
  /** Null: the local engine only. */
  readonly remote: RemoteEngine | null;
  /** Where the tokens of each request are added up; {@linkcode tokensUsed} when absent. */
  readonly tokens?: TokenTally;
}

/** Tokens the remote engine's requests used, added up since start (the metric reads it). */
export interface TokenTally {
  prompt: number;
  completion: number;
  /** Requests answered with a `usage`. */
  requests: number;
}

/** This process's tally, read by the enrichment view's token counter (view.ts). */
export const tokensUsed: TokenTally = { prompt: 0, completion: 0, requests: 0 };

/** A claimed enrichment: the user book's id and the claim's fence. */
export interface EnrichmentJob extends ClaimedJob {
  readonly claimed_by: string;
  /** The intent (uuid) of the Idempotency-Key; new at every admin retry. */
  readonly intent: string;
  readonly title: string | null;
  readonly author: string | null;
}

/** The metadata saved on `Completed`: the local fields, plus the remote ones when it ran. */
export type Metadata = LocalMetadata & Partial<RemoteMetadata> & {
  engine: "local" | "openai-compatible";
};

/** A book's enrichment as the API shows it: the status columns and the metadata fields. */
export interface EnrichmentView {
  status: EnrichmentStatus | null;
  attempt_count: number;
  error: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  /** Every attempt that ended, oldest first (the last 20; sql/010_operations.sql). */
  attempts: unknown[];
  language: string | null;
  word_count: number | null;
  reading_time_minutes: number | null;
  summary: string | null;
  [field: string]: unknown;
}

/**
 * Read the remote engine's settings: on when `ENRICHMENT_API_URL` is set. Every one is checked
 * whenever it is set, the engine on or off.
 *
 * @param env variables by name; an empty string counts as unset.
 * @returns the settings, or null when `ENRICHMENT_API_URL` is unset.
 * @throws {ConfigError} when `ENRICHMENT_API_URL` is not an http(s) URL, `ENRICHMENT_MODEL` is
 *   missing while the URL is set, `ENRICHMENT_API_KEY` holds spaces or control characters (it
 *   goes into a header), `ENRICHMENT_API_TIMEOUT_MS` is not a positive integer,
 *   `ENRICHMENT_API_MAX_RETRIES` is not an integer from 0 to 10 (default 2), or
 *   `ENRICHMENT_RETRY_AFTER_MAX_MS` not one from 0 to 3600000 (default 120000).
 */
export function readRemoteSettings(
  env: Readonly<Record<string, string | undefined>>,
): RemoteSettings | null {
  const rawTimeout = env.ENRICHMENT_API_TIMEOUT_MS || "60000";
  if (!/^\d+$/.test(rawTimeout) || Number(rawTimeout) < 1 || Number(rawTimeout) > 2_147_483_647) {
    throw new ConfigError(
      `Cannot parse ENRICHMENT_API_TIMEOUT_MS: expected a positive integer (ms) up to 2147483647, received ${
        JSON.stringify(rawTimeout)
      }`,
    );
  }
  const retries = integerSetting(env, "ENRICHMENT_API_MAX_RETRIES", 2, 0, 10);
  const waitMax = integerSetting(env, "ENRICHMENT_RETRY_AFTER_MAX_MS", 120_000, 0, 3_600_000);
  const apiKey = env.ENRICHMENT_API_KEY || undefined;
  if (apiKey !== undefined && !/^[\x21-\x7e]+$/.test(apiKey)) {
    // A secret is never echoed, not even a wrong one: only its length.
    throw new ConfigError(
      "Cannot parse ENRICHMENT_API_KEY: expected printable characters without spaces, received " +
        `a value of ${apiKey.length} characters`,
    );
  }
  const url = env.ENRICHMENT_API_URL;
  if (!url) return null;
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch { /* reported below */ }
  if (!parsed || !/^https?:$/.test(parsed.protocol)) {
    throw new ConfigError(
      `Cannot parse ENRICHMENT_API_URL: expected an http:// or https:// URL, received ${
        JSON.stringify(url)
      }`,
    );
  }
  const model = env.ENRICHMENT_MODEL;
  if (!model) {
    throw new ConfigError(
      'Cannot parse ENRICHMENT_MODEL: expected a model name when ENRICHMENT_API_URL is set, received ""',
    );
  }
  return {
    url,
    apiKey,
    model,
    timeoutMs: Number(rawTimeout),
    maxRetries: retries,
    retryAfterMaxMs: waitMax,
  };
}

// A whole number in [min, max], or its default when unset.
function integerSetting(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name] || String(fallback);
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(
      `Cannot parse ${name}: expected an integer from ${min} to ${max}, received ${
        JSON.stringify(raw)
      }`,
    );
  }
  return Number(raw);
}

/** The remote engine for these settings, or null (local only). */
export function remoteEngine(settings: RemoteSettings | null): RemoteEngine | null {
  if (!settings) return null;
  let client: Promise<OpenAI> | undefined;
  return {
    client: () => client ??= import("./_remote.ts").then((m) => m.createClient(settings)),
    settings,
  };
}

// --- Read, admin retry (the API's statements) ---

/** A book's enrichment; null when no book has that id. */
export async function getJob(ctx: QueueContext, id: string): Promise<EnrichmentView | null> {
  const [row] = await ctx.sql<
    {
      status: EnrichmentStatus | null;
      attempt_count: number;
      error: string | null;
      started_at: Date | null;
      finished_at: Date | null;
      attempts: unknown[];
      metadata: Metadata | null;
    }[]
  >`
    select metadata_enrichment_status as status, metadata_enrichment_attempt_count as attempt_count,
           metadata_enrichment_error as error, metadata_enrichment_started_at as started_at,
           metadata_enrichment_finished_at as finished_at,
           metadata_enrichment_attempts as attempts, metadata
    from user_books where id = ${id}`;
  if (!row) return null;
  const { metadata, ...status } = row;
  return {
    ...status,
    language: null,
    word_count: null,
    reading_time_minutes: null,
    summary: null,
    ...metadata,
  };
}

/**
 * Admin retry: `Failed` → `Pending`, attempts reset, error cleared (ADR-022: only an admin retry
 * brings a Failed job back), and a new intent: the requests' Idempotency-Key changes, so a
 * provider that stored the failed attempt's answer does not replay it. The commit NOTIFYs the
 * consumer.
 *
 * @returns the book's enrichment after the retry, or null when it is not `Failed` (or the book
 *   does not exist): nothing changes then.
 */
export async function retry(ctx: QueueContext, id: string): Promise<EnrichmentView | null> {
  const rows = await ctx.sql`
    update user_books
    set metadata_enrichment_status = 'Pending', metadata_enrichment_attempt_count = 0,
        metadata_enrichment_error = null, metadata_enrichment_claimed_by = null,
        metadata_enrichment_started_at = null, metadata_enrichment_finished_at = null,
        metadata_enrichment_intent = gen_random_uuid(), metadata_enrichment_run_after = null,
        updated_at = now()
    where id = ${id} and metadata_enrichment_status = 'Failed'`;
  if (rows.count === 0) return null;
  ctx.events.publish({ queue: name, id, transition: "retried", status: "Pending", attempt: 0 });
  return await getJob(ctx, id);
}

/**
 * Stale recovery, on every wake: `Running` started more than `staleAfterMs` ago → `Pending` with
 * the attempt spent, or `Failed` at the cap (ADR-022 row 3; the cap is this queue's own, beyond the ADR). One statement.
 */
export async function recover(ctx: EnrichmentContext, _signal: AbortSignal): Promise<void> {
  const rows = await ctx.sql<{ id: string; status: EnrichmentStatus; attempt_count: number }[]>`
    update user_books
    set metadata_enrichment_status = case when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS}
          then 'Failed' else 'Pending' end,
        metadata_enrichment_error = 'interrupted: attempt ' || metadata_enrichment_attempt_count
          || ' of ' || ${MAX_ATTEMPTS}::int || ' was stale (Running too long)',
        metadata_enrichment_finished_at = case
          when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS} then now() end,
        metadata_enrichment_claimed_by = null, updated_at = now()
    where metadata_enrichment_status = 'Running'
      and metadata_enrichment_started_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
    returning id, metadata_enrichment_status as status,
              metadata_enrichment_attempt_count as attempt_count`;
  for (const row of rows) {
    ctx.log.warn({ queue: name, id: row.id, status: row.status }, "stale enrichment recovered");
    ctx.events.publish({
      queue: name,
      id: row.id,
      transition: "recovered",
      status: row.status,
      attempt: row.attempt_count,
    });
  }
}

/**
 * Orphan recovery, once each time the consumer takes the queue lock: every `Running` row is
 * orphaned then. One claimed by this same boot (a lost lock whose give-back did not land) is given
 * back, attempt not counted; one claimed by another boot follows the crash rule: `Pending` with the
 * attempt spent, `Failed` at the cap. One transaction.
 */
export async function recoverOrphans(
  ctx: EnrichmentContext,
  _signal: AbortSignal,
  scope: OrphanScope = "all",
): Promise<void> {
  type Row = { id: string; status: EnrichmentStatus; attempt_count: number };
  const { givenBack, crashed } = await transaction(ctx.sql, ctx.log, async (tx) => {
    const givenBack = await tx.sql<Row[]>`
      update user_books
      set metadata_enrichment_status = 'Pending',
          metadata_enrichment_attempt_count = metadata_enrichment_attempt_count - 1,
          metadata_enrichment_error = null, metadata_enrichment_claimed_by = null,
          metadata_enrichment_started_at = null, updated_at = now()
      where metadata_enrichment_status = 'Running'
        and metadata_enrichment_claimed_by = ${ctx.bootId}
      returning id, metadata_enrichment_status as status,
                metadata_enrichment_attempt_count as attempt_count`;
    // Scope "own" (a claim whose reply was lost): another boot's row may be a standby's live claim.
    if (scope === "own") return { givenBack, crashed: [] };
    const crashed = await tx.sql<Row[]>`
      update user_books
      set metadata_enrichment_status = case
            when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS} then 'Failed' else 'Pending' end,
          metadata_enrichment_error = 'interrupted: attempt ' || metadata_enrichment_attempt_count
            || ' of ' || ${MAX_ATTEMPTS}::int || ' stopped without finishing (consumer restarted)',
          metadata_enrichment_finished_at = case
            when metadata_enrichment_attempt_count >= ${MAX_ATTEMPTS} then now() end,
          metadata_enrichment_claimed_by = null, updated_at = now()
      where metadata_enrichment_status = 'Running'
        and metadata_enrichment_claimed_by is distinct from ${ctx.bootId}
      returning id, metadata_enrichment_status as status,
                metadata_enrichment_attempt_count as attempt_count`;
    return { givenBack, crashed };
  });
  for (const row of givenBack) {
    ctx.log.info({ queue: name, id: row.id }, "orphaned enrichment of this boot given back");
    ctx.events.publish({ queue: name, id: row.id, transition: "given_back", ...pick(row) });
  }
  for (const row of crashed) {
    ctx.log.warn({ queue: name, id: row.id, status: row.status }, "orphaned enrichment recovered");
    ctx.events.publish({ queue: name, id: row.id, transition: "recovered", ...pick(row) });
  }
}

function pick(row: { status: EnrichmentStatus; attempt_count: number }) {
  return { status: row.status, attempt: row.attempt_count };
}

/**
 * When the next `Pending` book that is waiting out a provider's `Retry-After` becomes due, so the
 * idle consumer wakes for it.
 *
 * @returns ms from now (database clock), or null when no book waits.
 */
export async function nextDueMs(ctx: EnrichmentContext): Promise<number | null> {
  const [row] = await ctx.sql<{ ms: number | null }[]>`
    select (extract(epoch from min(metadata_enrichment_run_after) - now()) * 1000)::float8 as ms
    from user_books
    where metadata_enrichment_status = 'Pending'
      and metadata_enrichment_attempt_count < ${MAX_ATTEMPTS}
      and metadata_enrichment_run_after > now()`;
  return row.ms;
}

/**
 * Claim the oldest `Pending` book: one atomic conditional UPDATE `Pending` → `Running` (ADR-022
 * row 3), the scalar `id = (select … for update skip locked limit 1)` taking exactly one row
 * (docs/development.md). Counts the attempt and stamps this boot's id.
 *
 * @param lockHeld the queue lock's claim fence (lib/lock.ts): without the lock, nothing is claimed.
 *   Omitted only by tests that call the verb directly.
 * @returns the claimed book, or null when none is Pending.
 */
export async function claim(
  ctx: EnrichmentContext,
  lockHeld?: Fragment,
): Promise<EnrichmentJob | null> {
  const [row] = await ctx.sql<(EnrichmentJob & { runnable_for_s: number | null })[]>`
    update user_books
    set metadata_enrichment_status = 'Running',
        metadata_enrichment_attempt_count = metadata_enrichment_attempt_count + 1,
        metadata_enrichment_claimed_by = ${ctx.bootId},
        metadata_enrichment_started_at = now(), updated_at = now()
    where id = (
      select id from user_books
      where ${lockHeld ?? ctx.sql`true`} and metadata_enrichment_status = 'Pending'
        and metadata_enrichment_attempt_count < ${MAX_ATTEMPTS}
        and (metadata_enrichment_run_after is null or metadata_enrichment_run_after <= now())
      order by id
      for update skip locked
      limit 1
    )
    returning id, metadata_enrichment_attempt_count as attempt_count,
              metadata_enrichment_claimed_by as claimed_by,
              metadata_enrichment_intent as intent, title, author, (
                -- The wake latency: a subquery in RETURNING reads the statement's
                -- snapshot, so it sees the row as it was before this claim: Pending since its
                -- last write (the completing ingestion, a give-back, a retry, a recovery).
                select extract(epoch from now() - o.updated_at)::float8
                from user_books o
                where o.id = user_books.id and o.metadata_enrichment_status = 'Pending'
              ) as runnable_for_s`;
  if (!row) return null;
  const { runnable_for_s, ...job } = row;
  ctx.events.publish({
    queue: name,
    id: job.id,
    transition: "claimed",
    status: "Running",
    attempt: job.attempt_count,
    runnableForS: runnable_for_s,
  });
  return job;
}

/**
 * Give a claimed book back on shutdown: `Pending`, the attempt un-counted, no error (ADR-022 row
 * 3, "same cancellation catch → Pending"). Fenced on the claim.
 *
 * @returns false when the fence matched no row.
 */
export async function giveBack(ctx: EnrichmentContext, job: EnrichmentJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Pending',
          metadata_enrichment_attempt_count = metadata_enrichment_attempt_count - 1,
          metadata_enrichment_error = null, metadata_enrichment_started_at = null`,
    { transition: "given_back", status: "Pending", attempt: job.attempt_count - 1 },
  );
}

/**
 * Settle a run an admin cancelled, once it has stopped: `Failed` with {@linkcode CANCELLED}.
 * Fenced on the claim.
 *
 * @returns false when the fence matched no row.
 */
export async function cancelRun(ctx: EnrichmentContext, job: EnrichmentJob): Promise<boolean> {
  return await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Failed', metadata_enrichment_error = ${CANCELLED},
          metadata_enrichment_finished_at = now()`,
    { transition: "cancelled", status: "Failed", attempt: job.attempt_count, error: CANCELLED },
  );
}

/**
 * Enrich one book: the local metadata from its chapters, then, when the remote engine is on, the
 * provider's answer (_remote.ts: its retries and waits happen inside this run); then `Completed`
 * with the metadata in one fenced write. The local metadata is saved whatever the provider does:
 * with the `Failed` or `Pending` write of a provider fault too (`engine: "local"`).
 *
 * @param signal aborted on shutdown or a lost lock (the run rejects with its reason and saves
 *   nothing, also during a provider's `Retry-After` wait; the consumer gives the claim back), or
 *   on the run timeout (retried under the cap).
 * @throws the signal's reason when aborted for shutdown or a lost lock.
 */
export async function run(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  signal: AbortSignal,
): Promise<void> {
  let local: Metadata | undefined;
  try {
    const chapters = await ctx.sql<{ html: string }[]>`
      select html from user_chapters where user_book_id = ${job.id} order by position`;
    const { enrichLocally, htmlToText } = await import("./_local.ts");
    const computed = enrichLocally(chapters.map((c) => c.html), signal);
    local = { ...computed, engine: "local" };
    let metadata: Metadata = local;
    if (ctx.remote) {
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
      metadata = { ...computed, ...remote, engine: "openai-compatible" };
    }
    signal.throwIfAborted();
    const completed = await settle(
      ctx,
      job,
      (sql) =>
        sql`metadata_enrichment_status = 'Completed', metadata = ${sql.json(metadata)},
            metadata_enrichment_error = null, metadata_enrichment_finished_at = now()`,
      { transition: "completed", status: "Completed", attempt: job.attempt_count },
    );
    if (completed) ctx.log.info({ queue: name, id: job.id, engine: metadata.engine }, "enriched");
  } catch (err) {
    if (signal.aborted) {
      if (!isRunTimeout(signal.reason)) throw signal.reason;
      return await retryLater(ctx, job, signal.reason, local);
    }
    // Only the remote engine has permanent faults (a malformed answer, an HTTP 4xx).
    const remote = ctx.remote ? await import("./_remote.ts") : null;
    if (remote?.isPermanent(err)) return await fail(ctx, job, (err as Error).message, local);
    const waitMs = remote && err instanceof remote.WaitTooLongError ? err.waitMs : null;
    return await retryLater(ctx, job, err, local, waitMs);
  }
}

function excerpt(chapters: string[], htmlToText: (html: string) => string): string {
  let text = "";
  for (const html of chapters) {
    if (text.length >= EXCERPT_CHARS) break;
    text += `${htmlToText(html)}\n`;
  }
  return text.slice(0, EXCERPT_CHARS);
}

type TxFragment = ReturnType<TxSql>;

// Every write that settles a claimed book goes through here. It matches the row as this run
// claimed it (Running, this attempt, this boot); 0 rows means the claim was lost: log it, change
// nothing (docs/development.md). The event is published only once the write has committed.
async function settle(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  changes: (sql: TxSql) => TxFragment,
  event: Pick<JobEvent, "transition" | "status" | "attempt" | "error">,
): Promise<boolean> {
  return await settleClaim(ctx, name, job.id, event, async (sql) =>
    (await sql`
      update user_books
      set ${changes(sql)}, metadata_enrichment_claimed_by = null, updated_at = now()
      where id = ${job.id} and metadata_enrichment_status = 'Running'
        and metadata_enrichment_attempt_count = ${job.attempt_count}
        and metadata_enrichment_claimed_by = ${job.claimed_by}`).count);
}

// The local metadata, when the run computed it, is saved with a fault's write (null keeps what the
// row holds).
async function fail(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  why: string,
  local?: Metadata,
): Promise<void> {
  const reason = jobError(why);
  const failed = await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Failed', metadata_enrichment_error = ${reason},
          metadata = coalesce(${local ? sql.json(local) : null}::jsonb, metadata),
          metadata_enrichment_finished_at = now()`,
    { transition: "failed", status: "Failed", attempt: job.attempt_count, error: reason },
  );
  if (failed) ctx.log.warn({ queue: name, id: job.id, reason }, "enrichment failed");
}

// A transient fault (network, 5xx, 429, a timeout, a wait asked beyond the bound): Pending again
// with the attempt spent while under the cap — due again once `waitMs` (the provider's asked wait)
// has passed — then Failed with the last fault as the reason.
async function retryLater(
  ctx: EnrichmentContext,
  job: EnrichmentJob,
  err: unknown,
  local?: Metadata,
  waitMs: number | null = null,
): Promise<void> {
  const detail = jobError(err instanceof Error ? err.message : String(err));
  if (job.attempt_count >= MAX_ATTEMPTS) {
    return await fail(
      ctx,
      job,
      `attempts exhausted (${job.attempt_count} of ${MAX_ATTEMPTS}): ${detail}`,
      local,
    );
  }
  const reason = `attempt ${job.attempt_count} of ${MAX_ATTEMPTS} failed, will retry: ${detail}`;
  const pending = await settle(
    ctx,
    job,
    (sql) =>
      sql`metadata_enrichment_status = 'Pending', metadata_enrichment_error = ${reason},
          metadata = coalesce(${local ? sql.json(local) : null}::jsonb, metadata),
          metadata_enrichment_run_after = ${
        waitMs === null ? null : sql`now() + ${waitMs} * interval '1 millisecond'`
      },
          metadata_enrichment_started_at = null`,
    { transition: "failed", status: "Pending", attempt: job.attempt_count, error: reason },
  );
  if (pending) ctx.log.warn({ queue: name, id: job.id, err: detail }, "enrichment will be retried");
}
