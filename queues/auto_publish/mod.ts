/**
 * The auto-publish queue: table `auto_publish_jobs` (sql/006_auto_publish.sql). Consumed on the
 * host by `host/seo-publish-poll.sh` (ADR-022 row 5) through the claim API of
 * queues/auto_publish/routes.ts; its `run` is the host's `PUBLISH_COMMAND`. This module holds the
 * SQL verbs those routes call; it has no in-process consumer, timers or state.
 *
 * Route-level diagram (beanstalkd style; every settle presents the claim's token):
 *
 * ```
 *   POST /jobs ─┐  (ingestion complete, same transaction)
 *               v
 *           [Queued] <──── give-back ────┐
 *               │                         │
 *     POST /jobs/claim (token minted)     │
 *               v                         │
 *           [Running] ────────────────────┘
 *            │   │   └─ POST /recover (poller start) ──> [Failed] "interrupted (consumer restarted)"
 *    complete│   │fail                                       ^
 *            v   v                                           │
 *   [Completed] [Failed] ── POST /jobs/:id/retry ──> [Queued]│(attempts reset)
 * ```
 *
 * - (none) → Queued: {@linkcode enqueue}; refused while the edition has a `Queued` or `Running`
 *   job, or 5 `Failed` jobs (interrupted ones included, admin cancels not) in the last 24 h (the
 *   breaker).
 * - Queued → Running: {@linkcode claim}, one job, `priority DESC, created_at`, SKIP LOCKED; counts
 *   the attempt and mints a fresh `claim_token`.
 * - Running → Completed: {@linkcode complete}: the edition is published, a Full SSG rebuild
 *   queued (deduplicated) and its IndexNow ping recorded in the outbox, all in one transaction;
 *   the outbox drain pings after the commit, so a lost COMMIT answer cannot skip the ping.
 * - Running → Failed: {@linkcode fail} (the command failed), {@linkcode recover} (the poller
 *   restarted: one consumer, so whatever is in flight at its start is orphaned — ADR-022).
 * - Running → Queued: {@linkcode giveBack} (the poller was stopped; attempt not counted).
 * - Failed → Queued: {@linkcode retry}, the admin retry; {@linkcode bulkRetry} for the matching
 *   `Failed` jobs, one per edition (the newest), none of an edition that has a job in flight.
 * - Queued → Failed: {@linkcode cancel}, the admin cancel (error `cancelled by admin`,
 *   `cancelled_at` set: the breaker does not count it). A `Running` job is not cancelled: the
 *   host's step may already have acted (409).
 *
 * A paused queue (lib/control.ts) claims nothing: {@linkcode claim} reads `queue_pauses` in its
 * own statement and returns no job.
 *
 * Stale rule: none by time; the poller's startup `recover` is the crash recovery (ADR-022 "Per
 * queue": "One startup UPDATE in seo-publish-poll.sh"). No leases, no heartbeats. Attempts cap: the
 * breaker, per edition, instead of per job.
 *
 * @module
 */
import type { Sql, TxSql } from "../../lib/db.ts";
import { publishEdition } from "../ssg/jobs.ts";
import { transaction } from "../../lib/db.ts";
import type { Logger } from "../../lib/log.ts";
import { recordPing } from "./_indexnow.ts";
import { type QueueContext } from "../../lib/queue.ts";
import type { Transition } from "../../lib/events.ts";
import {
  publishJob,
  settleByToken,
  type SettleOutcome,
  type TokenQueue,
  type TokenState,
} from "../../lib/claim_token.ts";

// The settings live beside the verbs (_settings.ts); setup.ts and the tests read them from here.
export { type AutoPublishSettings, defaults, parseSettings } from "./_settings.ts";
// The breaker and ingestion's statement under it (_breaker.ts).
export { BREAKER_FAILURES, BREAKER_WINDOW_H, createOnIngest } from "./_breaker.ts";

/** Queue name used in logs and events. */
export const name = "auto_publish";
/** The queue table. */
export const table = "auto_publish_jobs";
/** The error {@linkcode recover} writes (ADR-022, startup recovery). */
export const INTERRUPTED = "interrupted (consumer restarted)";

/** Statuses of `auto_publish_jobs.status`. */
export type AutoPublishStatus = "Queued" | "Running" | "Completed" | "Failed";

/** What the verbs need: the pool, the log, the event hub, and whether a publish pings IndexNow. */
export interface AutoPublishContext extends Pick<QueueContext, "sql" | "log" | "events"> {
  /**
   * Whether a complete records an IndexNow ping in the outbox, in its own transaction
   * (`INDEXNOW_URL` set); the outbox drain delivers it after the commit (lib/outbox.ts).
   */
  readonly indexNow: boolean;
}

/** A job row as the API shows it (never with its claim token). */
export interface AutoPublishJobRow {
  /** bigint id, as a string. */
  id: string;
  edition_id: string;
  priority: number;
  status: AutoPublishStatus;
  attempt_count: number;
  error: string | null;
  claimed_at: Date | null;
  /** What the poller reported, plus `published_at` and `ssg_job_id` from the complete. */
  result: Record<string, unknown> | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Every attempt that ended, oldest first (the last 20; sql/012_operations.sql). */
  attempts: unknown[];
  /** Set by an admin cancel (the breaker skips the job); null otherwise. */
  cancelled_at: Date | null;
}

/** A claimed job: the row, its edition, and the token its settles must present. */
export interface ClaimedAutoPublishJob extends AutoPublishJobRow {
  claim_token: string;
  edition: { id: string; title: string; author: string | null; published_at: Date | null };
}

/** What {@linkcode enqueue} did. */
export type CreateOutcome =
  | { outcome: "created"; job: AutoPublishJobRow }
  /** The edition already has this `Queued` or `Running` job. */
  | { outcome: "in_flight"; job: AutoPublishJobRow }
  /** The breaker is open: `failures` ≥ 5 in the window; creation is allowed again at `allowedAt`. */
  | { outcome: "breaker"; failures: number; allowedAt: Date }
  | { outcome: "no_edition" };

/**
 * Log what {@linkcode createOnIngest} did, once the ingestion committed.
 *
 * @param created how many jobs it created (0: refused, in flight or breaker open).
 */
export function reportOnIngest(log: Logger, editionId: string, created: number): void {
  if (created > 0) {
    log.info({ queue: name, edition: editionId }, "auto-publish job created");
  } else {
    log.info(
      { queue: name, edition: editionId, refused: "in_flight or breaker" },
      "auto-publish job not created",
    );
  }
}

// Every column but the token: the token is handed out by the claim only.
export const COLUMNS = [
  "id",
  "edition_id",
  "priority",
  "status",
  "attempt_count",
  "error",
  "claimed_at",
  "result",
  "finished_at",
  "created_at",
  "updated_at",
  "attempts",
  "cancelled_at",
];

/**
 * Startup recovery (ADR-022 row 5): the poller calls this when it starts. There is one poller, so
 * every `Running` row is orphaned: one UPDATE fails them all with {@linkcode INTERRUPTED}, clears
 * their tokens (a late settle from the dead run gets 409), and frees their editions for a new job
 * under the breaker (these failures count toward it).
 *
 * @returns the ids failed.
 */
export async function recover(ctx: Pick<AutoPublishContext, "sql" | "events">): Promise<string[]> {
  const rows = await ctx.sql<AutoPublishJobRow[]>`
    update auto_publish_jobs
    set status = 'Failed', error = ${INTERRUPTED}, claim_token = null, finished_at = now(),
        updated_at = now()
    where status = 'Running'
    returning ${ctx.sql(COLUMNS)}`;
  for (const row of rows) publish(ctx, row, "recovered");
  return rows.map((r) => r.id);
}

/**
 * Claim the next job: `Queued`, highest priority first, then oldest (ADR-022: keep `ORDER BY
 * priority DESC, created_at`). One statement: the scalar `id = (select … for update skip locked
 * limit 1)` takes exactly one row (docs/development.md), counts the attempt and mints a fresh token.
 *
 * With a claim key (docs/claim-keys.md) the claim is safe to repeat: under a transaction-level
 * advisory lock on the key (a repeat that arrives while the first is still running waits for it),
 * the job this key already claimed is returned again, `Running` with the same token and attempt;
 * a key whose job has been settled since (completed, failed, given back, recovered) claims
 * nothing; only a key no job carries claims, and stamps the job with it. The startup `recover`
 * (ADR-022) is not part of the claim and is unchanged: it fails a keyed job like any other.
 *
 * @param key the poller's claim key (uuid text), or undefined for a claim that is not repeatable.
 * @returns the claimed job with its edition and `claim_token`, or null when none is queued (or the
 *   key's job is settled), or when the queue is paused (`queue_pauses`, read in the same
 *   statement).
 */
export async function claim(
  ctx: Pick<AutoPublishContext, "sql" | "log" | "events">,
  key?: string,
): Promise<ClaimedAutoPublishJob | null> {
  if (key === undefined) {
    const row = await claimNext(ctx.sql, null);
    if (!row) return null;
    const { runnable_for_s, ...job } = row;
    publish(ctx, job, "claimed", runnable_for_s);
    return job;
  }
  return await transaction(ctx.sql, ctx.log, async (tx) => {
    await tx.sql`select pg_advisory_xact_lock(hashtext(${table}), hashtext(${key}))`;
    const held = await tx.sql<(ClaimedAutoPublishJob & { running: boolean })[]>`
      select ${tx.sql(COLUMNS.map((c) => `c.${c}`))}, c.claim_token,
             c.status = 'Running' as running, ${editionJson(tx.sql)}
      from auto_publish_jobs c join editions e on e.id = c.edition_id
      where c.claim_key = ${key}`;
    if (held.length > 0) {
      const again = held.find((r) => r.running);
      if (!again) return null;
      const { running: _, ...job } = again;
      ctx.log.info({ queue: name, id: job.id, key }, "claim repeated: the same job and token");
      return job;
    }
    const row = await claimNext(tx.sql, key);
    if (!row) return null;
    const { runnable_for_s, ...job } = row;
    tx.afterCommit(() => publish(ctx, job, "claimed", runnable_for_s));
    return job;
  });
}

// The claiming statement: the next Queued job → Running, stamped with `key` (null: no key).
async function claimNext(
  sql: Sql | TxSql,
  key: string | null,
): Promise<(ClaimedAutoPublishJob & { runnable_for_s: number | null }) | undefined> {
  const [row] = await sql<(ClaimedAutoPublishJob & { runnable_for_s: number | null })[]>`
    with claimed as (
      update auto_publish_jobs
      set status = 'Running', attempt_count = attempt_count + 1, claim_token = gen_random_uuid(),
          claim_key = ${key}, claimed_at = now(), updated_at = now()
      where id = (
        select id from auto_publish_jobs
        where status = 'Queued'
          and not exists (select from queue_pauses where queue = ${name})
        order by priority desc, created_at, id
        for update skip locked
        limit 1
      )
      returning *, (
        -- The wake latency (here the poller's latency): a subquery in RETURNING reads the
        -- statement's snapshot, so it sees the row before this claim, Queued since its last
        -- write (insert, give-back, retry).
        select extract(epoch from now() - o.updated_at)::float8
        from auto_publish_jobs o where o.id = auto_publish_jobs.id and o.status = 'Queued'
      ) as runnable_for_s
    )
    select ${sql(COLUMNS.map((c) => `c.${c}`))}, c.claim_token, c.runnable_for_s,
           ${editionJson(sql)}
    from claimed c join editions e on e.id = c.edition_id`;
  return row;
}

// The edition as a claim returns it, from `e` (the job's edition).
function editionJson(sql: Sql | TxSql) {
  return sql`jsonb_build_object('id', e.id::text, 'title', e.title, 'author', e.author,
                                'published_at', e.published_at) as edition`;
}

/**
 * Complete a claimed job: in one transaction the fence (status `Running` and this token), the
 * edition published with a Full SSG rebuild queued or reused ({@linkcode publishEdition}), its
 * IndexNow ping recorded in the outbox (once per edition and version, `recordPing`), and the job
 * `Completed` with its result. The outbox drain pings after the commit (lib/outbox.ts).
 *
 * @param token the claim's token (uuid text).
 * @param result what the poller reported (stored; `published_at` and `ssg_job_id` are added).
 * @returns see {@linkcode SettleOutcome}; nothing changes unless `settled`.
 */
export async function complete(
  ctx: AutoPublishContext,
  id: string,
  token: string,
  result: Record<string, unknown>,
): Promise<SettleOutcome<AutoPublishJobRow>> {
  const write = () =>
    transaction(ctx.sql, ctx.log, async (tx) => {
      // The fence first: it row-locks the job, so a concurrent give-back or recover waits and
      // then matches nothing.
      const [fenced] = await tx.sql<{ edition_id: string }[]>`
        update auto_publish_jobs
        set status = 'Completed', error = null, finished_at = now(), updated_at = now()
        where id = ${id} and status = 'Running' and claim_token = ${token}
        returning edition_id`;
      if (!fenced) return undefined;
      // The job references its edition (on delete cascade), so the edition is there.
      const published = await publishEdition(tx.sql, fenced.edition_id, true);
      if (!published) throw new Error(`Cannot publish edition ${fenced.edition_id}: it is gone`);
      if (ctx.indexNow) await recordPing(tx.sql, fenced.edition_id);
      const stored = {
        ...result,
        published_at: published.published_at,
        ssg_job_id: published.rebuild.id,
      };
      const [row] = await tx.sql<AutoPublishJobRow[]>`
        update auto_publish_jobs set result = ${tx.sql.json(JSON.parse(JSON.stringify(stored)))}
        where id = ${id}
        returning ${tx.sql(COLUMNS)}`;
      return row;
    });
  const outcome = await settleByToken(ctx, tokenQueue, { verb: "complete", id, token }, write);
  if (outcome.outcome === "settled") {
    ctx.log.info({ queue: name, id, edition: outcome.job.edition_id }, "edition auto-published");
  }
  return outcome;
}

/**
 * Fail a claimed job (the host command failed): `Failed` with `error`, fenced on the token.
 *
 * @param error the readable reason (the command's stderr tail).
 * @returns see {@linkcode SettleOutcome}; nothing changes unless `settled`.
 */
export async function fail(
  ctx: Pick<AutoPublishContext, "sql" | "events">,
  id: string,
  token: string,
  error: string,
): Promise<SettleOutcome<AutoPublishJobRow>> {
  return await settleByToken(ctx, tokenQueue, { verb: "fail", id, token }, async () => {
    const [row] = await ctx.sql<AutoPublishJobRow[]>`
      update auto_publish_jobs
      set status = 'Failed', error = ${error}, finished_at = now(), updated_at = now()
      where id = ${id} and status = 'Running' and claim_token = ${token}
      returning ${ctx.sql(COLUMNS)}`;
    return row;
  });
}

/**
 * Give a claimed job back (the poller was stopped): `Queued`, the attempt un-counted, no error
 * text (ADR-022: a shutdown is never `Failed`). Fenced on the token, so a lost claim is never
 * un-counted.
 *
 * @returns see {@linkcode SettleOutcome}; nothing changes unless `settled`.
 */
export async function giveBack(
  ctx: Pick<AutoPublishContext, "sql" | "events">,
  id: string,
  token: string,
): Promise<SettleOutcome<AutoPublishJobRow>> {
  return await settleByToken(ctx, tokenQueue, { verb: "give-back", id, token }, async () => {
    const [row] = await ctx.sql<AutoPublishJobRow[]>`
      update auto_publish_jobs
      set status = 'Queued', attempt_count = attempt_count - 1, error = null, claimed_at = null,
          updated_at = now()
      where id = ${id} and status = 'Running' and claim_token = ${token}
      returning ${ctx.sql(COLUMNS)}`;
    return row;
  });
}

// This queue as settleByToken sees it: its name, and its re-read of a job with its token.
const tokenQueue: TokenQueue<AutoPublishJobRow> = { name, reread };

// The job as it is now, with its token: what settleByToken reads after a fenced write missed.
async function reread(
  sql: Sql,
  id: string,
): Promise<(AutoPublishJobRow & TokenState) | undefined> {
  const [row] = await sql<(AutoPublishJobRow & TokenState)[]>`
    select ${sql(COLUMNS)}, claim_token from auto_publish_jobs where id = ${id}`;
  return row;
}

/** Publish one of this queue's transitions once it committed (lib/claim_token.ts `publishJob`). */
export function publish(
  ctx: Pick<AutoPublishContext, "events">,
  row: AutoPublishJobRow,
  transition: Transition,
  runnableForS?: number | null,
): void {
  publishJob(ctx.events, name, row, transition, runnableForS);
}
