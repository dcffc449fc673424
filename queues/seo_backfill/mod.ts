/**
 * The SEO backfill queue: table `seo_backfill_jobs` (sql/007_seo_backfill.sql). Two consumers
 * (ADR-022 row 6): the host poller `host/seo-backfill-poll.sh`, which claims up to N jobs at a
 * time, and the admin crew path, which inserts its own job already `Running`. Both settle through
 * the claim API of queues/seo_backfill/routes.ts; `run` is the host's `SEO_COMMAND`. This module
 * holds the SQL verbs; it has no in-process consumer, timers or state.
 *
 * Route-level diagram (beanstalkd style; every settle presents the claim's token):
 *
 * ```
 *   POST /jobs                         POST /jobs/crew (admin tool; token minted)
 *       v                                    │
 *   [Queued] <──── give-back ─────┐          │
 *       │                          │          │
 *   POST /jobs/claim {limit}       │          │
 *   (sweep first; tokens minted)   │          │
 *       v                          │          v
 *   [Running] ─────────────────────┴──── [Running]
 *    │   │   └─ next claim's sweep, claimed > SEO_STALE_AFTER_MS ago ──> [Failed] "interrupted …"
 *    │   └─ fail ──> [Failed] ── POST /jobs/:id/retry ──> [Queued] (attempts reset)
 *    └─ complete ──> [Completed]  (SEO fields applied; BeforeSnapshot taken once per edition)
 *
 *   POST /editions/:id/revert: the edition's SEO fields ← its BeforeSnapshot (then dropped)
 * ```
 *
 * - (none) → Queued: {@linkcode enqueue}. (none) → Running: {@linkcode crew}, so there is no
 *   `Queued` window in which the poller could claim the crew's job (ADR-022 "Per queue").
 * - Queued → Running: {@linkcode claim}, up to N (1..50), oldest first, SKIP LOCKED; each job
 *   gets its own fresh token and a counted attempt.
 * - Running → Completed: {@linkcode complete} writes the edition's SEO fields, after a
 *   BeforeSnapshot of the originals taken the first time this path changes that edition.
 * - Running → Failed: {@linkcode fail}; {@linkcode recover} for rows claimed longer than
 *   `staleAfterMs` ago (default 1 h).
 * - Running → Queued: {@linkcode giveBack}, {@linkcode giveBackMany} (the poller was stopped;
 *   attempt not counted).
 * - Failed → Queued: {@linkcode retry}, the admin retry; {@linkcode bulkRetry} for every
 *   `Failed` job matching a filter, in one statement.
 * - Queued → Failed: {@linkcode cancel}, the admin cancel (error `cancelled by admin`). A
 *   `Running` job is not cancelled: the host's step may already have acted (409).
 *
 * A paused queue (lib/control.ts) claims nothing: {@linkcode claim} reads `queue_pauses` in its
 * own statement and returns no job (the stale sweep still runs).
 *
 * Stale rule: before each claim, `Running` rows claimed more than `SEO_STALE_AFTER_MS` ago become
 * `Failed` — not a startup UPDATE, because the crew path is a second consumer whose in-flight
 * rows a poller's start must not touch (ADR-022 "Per queue"). No leases or heartbeats. Attempts
 * cap: none; admin retry only (ADR-022 row 6).
 *
 * @module
 */
import type { Sql, TxSql } from "../../lib/db.ts";
import { transaction } from "../../lib/db.ts";
import type { QueueDefaults } from "../../lib/config.ts";
import { type QueueContext } from "../../lib/queue.ts";
import type { Transition } from "../../lib/events.ts";
import {
  publishJob,
  settleByToken,
  type SettleOutcome,
  type TokenQueue,
  type TokenState,
} from "../../lib/claim_token.ts";
import { applyFields, editionJson, type SeoEdition, type SeoFields } from "./_edition.ts";

// The edition's side (its SEO fields, the BeforeSnapshot, the revert) lives in _edition.ts.
export { revert, type SeoFields } from "./_edition.ts";

/** Queue name used in logs and events. */
export const name = "seo_backfill";
/** The queue table. */
export const table = "seo_backfill_jobs";
/**
 * Settings: `SEO_STALE_AFTER_MS` (default 1 h, ADR-022 "Per queue"). No `SEO_TIMEOUT_MS`: the host
 * command bounds its own run; a set value stops startup.
 */
export const defaults: QueueDefaults<number, null> = {
  envPrefix: "SEO",
  staleAfterMs: 3_600_000,
  timeoutMs: null,
  without: {
    timeoutMs: "the seo queue's runs are the host poller's command, which bounds its own run " +
      "(the stale sweep, SEO_STALE_AFTER_MS, fails one that never settles)",
  },
};
/** Most jobs one claim may take (1 ≤ N ≤ 50). */
export const MAX_CLAIM = 50;

/** Statuses of `seo_backfill_jobs.status`. */
export type SeoStatus = "Queued" | "Running" | "Completed" | "Failed";

/** What the verbs need: the pool, the log, the event hub and the stale threshold. */
export interface SeoContext extends Pick<QueueContext, "sql" | "log" | "events"> {
  /** A `Running` row claimed longer ago than this (ms) is failed by the next claim's sweep. */
  readonly staleAfterMs: number;
}

/** A job row as the API shows it (never with its claim token). */
export interface SeoJobRow {
  /** bigint id, as a string. */
  id: string;
  edition_id: string;
  status: SeoStatus;
  attempt_count: number;
  error: string | null;
  claimed_at: Date | null;
  claimed_via: "poller" | "crew" | null;
  /** The SEO fields applied on complete. */
  result: SeoFields | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Every attempt that ended, oldest first (the last 20; sql/012_operations.sql). */
  attempts: unknown[];
}

/** A claimed job: the row, its edition (what the SEO command reads), and its token. */
export interface ClaimedSeoJob extends SeoJobRow {
  claim_token: string;
  edition: SeoEdition;
}

export const COLUMNS = [
  "id",
  "edition_id",
  "status",
  "attempt_count",
  "error",
  "claimed_at",
  "claimed_via",
  "result",
  "finished_at",
  "created_at",
  "updated_at",
  "attempts",
];

/**
 * The stale sweep, run before each claim (ADR-022 row 6): `Running` rows claimed more than
 * `staleAfterMs` ago — poller or crew — become `Failed`, their tokens cleared so a late settle from
 * the lost run gets 409.
 *
 * @returns the ids failed.
 */
export async function recover(
  ctx: Pick<SeoContext, "sql" | "events" | "staleAfterMs">,
): Promise<string[]> {
  const rows = await ctx.sql<SeoJobRow[]>`
    update seo_backfill_jobs
    set status = 'Failed', claim_token = null, finished_at = now(), updated_at = now(),
        error = 'interrupted (Running longer than ' || ${ctx.staleAfterMs}::bigint || ' ms)'
    where status = 'Running'
      and claimed_at < now() - ${ctx.staleAfterMs} * interval '1 millisecond'
    returning ${ctx.sql(COLUMNS)}`;
  for (const row of rows) publish(ctx, row, "recovered");
  return rows.map((r) => r.id);
}

/**
 * Sweep, then claim up to `limit` `Queued` jobs, oldest first: one statement whose CTE locks the
 * rows (`for update skip locked`, evaluated once) and whose UPDATE counts each attempt and mints
 * each job its own token (never `id in (select …)`: docs/development.md).
 *
 * With a claim key (docs/claim-keys.md) the claim is safe to repeat. The sweep runs first,
 * unchanged (ADR-022). Then, under a transaction-level advisory lock on the key (a repeat that
 * arrives while the first is still running waits for it): the poller jobs this key claimed that
 * are still `Running` are returned again, same tokens and attempts; a key whose jobs have all been
 * settled since (completed, failed, given back, swept) claims nothing; only a key no job carries
 * claims, and stamps its jobs with it. Crew jobs never carry a key, and the lookup reads poller
 * jobs only, so a key never returns or touches a crew job.
 *
 * @param limit 1..{@linkcode MAX_CLAIM}; a repeat returns the key's jobs whatever its limit.
 * @param key the poller's claim key (uuid text), or undefined for a claim that is not repeatable.
 * @returns the claimed jobs, oldest first, each with its edition and `claim_token`; [] when none
 *   is queued or the queue is paused (`queue_pauses`, read in the same statement).
 */
export async function claim(
  ctx: SeoContext,
  limit: number,
  key?: string,
): Promise<ClaimedSeoJob[]> {
  await recover(ctx);
  if (key === undefined) {
    return (await claimNext(ctx.sql, limit, null)).map(({ runnable_for_s, ...job }) => {
      publish(ctx, job, "claimed", runnable_for_s);
      return job;
    });
  }
  return await transaction(ctx.sql, ctx.log, async (tx) => {
    await tx.sql`select pg_advisory_xact_lock(hashtext(${table}), hashtext(${key}))`;
    const held = await tx.sql<(ClaimedSeoJob & { running: boolean })[]>`
      select ${tx.sql(COLUMNS.map((c) => `c.${c}`))}, c.claim_token,
             c.status = 'Running' as running, ${editionJson(tx.sql)}
      from seo_backfill_jobs c join editions e on e.id = c.edition_id
      where c.claim_key = ${key} and c.claimed_via = 'poller'
      order by c.created_at, c.id`;
    if (held.length > 0) {
      const again = held.filter((r) => r.running).map(({ running: _, ...job }) => job);
      ctx.log.info(
        { queue: name, ids: again.map((j) => j.id), key },
        "claim repeated: the same jobs and tokens",
      );
      return again;
    }
    return (await claimNext(tx.sql, limit, key)).map(({ runnable_for_s, ...job }) => {
      tx.afterCommit(() => publish(ctx, job, "claimed", runnable_for_s));
      return job;
    });
  });
}

// The claiming statement: up to `limit` Queued jobs → Running, stamped with `key` (null: none).
async function claimNext(
  sql: Sql | TxSql,
  limit: number,
  key: string | null,
): Promise<(ClaimedSeoJob & { runnable_for_s: number | null })[]> {
  return [
    ...await sql<(ClaimedSeoJob & { runnable_for_s: number | null })[]>`
    with picked as (
      select id as picked_id from seo_backfill_jobs
      where status = 'Queued'
        and not exists (select from queue_pauses where queue = ${name})
      order by created_at, id
      for update skip locked
      limit ${limit}
    ), claimed as (
      update seo_backfill_jobs j
      set status = 'Running', attempt_count = j.attempt_count + 1,
          claim_token = gen_random_uuid(), claim_key = ${key}, claimed_at = now(),
          claimed_via = 'poller', updated_at = now()
      from picked where j.id = picked.picked_id
      returning j.*, (
        -- The wake latency (here the poller's latency): a subquery in RETURNING reads the
        -- statement's snapshot, so it sees the row before this claim, Queued since its last
        -- write (insert, give-back, retry).
        select extract(epoch from now() - o.updated_at)::float8
        from seo_backfill_jobs o where o.id = j.id and o.status = 'Queued'
      ) as runnable_for_s
    )
    select ${sql(COLUMNS.map((c) => `c.${c}`))}, c.claim_token, c.runnable_for_s,
           ${editionJson(sql)}
    from claimed c join editions e on e.id = c.edition_id
    order by c.created_at, c.id`,
  ];
}

/**
 * The admin crew path: insert a job for the edition directly as `Running`, with its token, so no
 * poller can claim it (ADR-022 "Per queue": no `Queued` → MarkRunning window). The caller settles
 * it through the same complete / fail routes; the sweep fails it if it is never settled.
 *
 * @returns the running job with its edition and `claim_token`, or null when no edition has that id.
 */
export async function crew(
  ctx: Pick<SeoContext, "sql" | "events">,
  editionId: string,
): Promise<ClaimedSeoJob | null> {
  const [job] = await ctx.sql<ClaimedSeoJob[]>`
    with claimed as (
      insert into seo_backfill_jobs
        (edition_id, status, attempt_count, claim_token, claimed_at, claimed_via)
      select id, 'Running', 1, gen_random_uuid(), now(), 'crew' from editions where id = ${editionId}
      returning *
    )
    select ${ctx.sql(COLUMNS.map((c) => `c.${c}`))}, c.claim_token, ${editionJson(ctx.sql)}
    from claimed c join editions e on e.id = c.edition_id`;
  if (!job) return null;
  publish(ctx, job, "claimed");
  return job;
}

/**
 * Complete a job and apply its SEO fields, in one transaction: the fence (status `Running` and
 * this token), the BeforeSnapshot of the edition's current fields — only if none exists yet, so
 * a second run never snapshots the first run's output (ADR-022, "SEO apply") — then the fields
 * ({@linkcode applyFields}).
 *
 * @param token the claim's token (uuid text).
 * @param fields the SEO fields the command produced.
 * @returns see {@linkcode SettleOutcome}; nothing changes unless `settled`.
 */
export async function complete(
  ctx: Pick<SeoContext, "sql" | "log" | "events">,
  id: string,
  token: string,
  fields: SeoFields,
): Promise<SettleOutcome<SeoJobRow>> {
  const write = () =>
    transaction(ctx.sql, ctx.log, async (tx) => {
      const [row] = await tx.sql<SeoJobRow[]>`
        update seo_backfill_jobs
        set status = 'Completed', error = null, result = ${tx.sql.json({ ...fields })},
            finished_at = now(), updated_at = now()
        where id = ${id} and status = 'Running' and claim_token = ${token}
        returning ${tx.sql(COLUMNS)}`;
      if (row) await applyFields(tx.sql, row.edition_id, fields);
      return row;
    });
  return await settleByToken(ctx, tokenQueue, { verb: "complete", id, token }, write);
}

/**
 * Fail a job (the SEO command failed): `Failed` with `error`, fenced on the token.
 *
 * @returns see {@linkcode SettleOutcome}; nothing changes unless `settled`.
 */
export async function fail(
  ctx: Pick<SeoContext, "sql" | "events">,
  id: string,
  token: string,
  error: string,
): Promise<SettleOutcome<SeoJobRow>> {
  return await settleByToken(ctx, tokenQueue, { verb: "fail", id, token }, async () => {
    const [row] = await ctx.sql<SeoJobRow[]>`
      update seo_backfill_jobs
      set status = 'Failed', error = ${error}, finished_at = now(), updated_at = now()
      where id = ${id} and status = 'Running' and claim_token = ${token}
      returning ${ctx.sql(COLUMNS)}`;
    return row;
  });
}

/**
 * Give a job back (the poller was stopped): `Queued`, attempt not counted, no error text. Fenced
 * on the token. A crew job given back becomes an ordinary queued job.
 *
 * @returns see {@linkcode SettleOutcome}; nothing changes unless `settled`.
 */
export async function giveBack(
  ctx: Pick<SeoContext, "sql" | "events">,
  id: string,
  token: string,
): Promise<SettleOutcome<SeoJobRow>> {
  return await settleByToken(ctx, tokenQueue, { verb: "give-back", id, token }, async () => {
    const [row] = await ctx.sql<SeoJobRow[]>`
      update seo_backfill_jobs
      set status = 'Queued', attempt_count = attempt_count - 1, error = null, claimed_at = null,
          updated_at = now()
      where id = ${id} and status = 'Running' and claim_token = ${token}
      returning ${ctx.sql(COLUMNS)}`;
    return row;
  });
}

/**
 * Give several jobs back in one statement (the poller's stop: one request, whatever the batch, so
 * the stop fits its budget): each row fenced on its own token, as {@linkcode giveBack}; each job's
 * answer is then settleByToken's, the statement's row standing for its fenced write.
 *
 * @param jobs ids with the tokens their claim returned (ids unique).
 * @returns one outcome per job, in the order given; nothing changes for a job unless `settled`.
 */
export async function giveBackMany(
  ctx: Pick<SeoContext, "sql" | "events">,
  jobs: ReadonlyArray<{ id: string; token: string }>,
): Promise<Array<{ id: string } & SettleOutcome<SeoJobRow>>> {
  const rows = await ctx.sql<SeoJobRow[]>`
    update seo_backfill_jobs j
    set status = 'Queued', attempt_count = j.attempt_count - 1, error = null, claimed_at = null,
        updated_at = now()
    from unnest(${ctx.sql.array(jobs.map((j) => j.id))}::bigint[],
                ${ctx.sql.array(jobs.map((j) => j.token))}::uuid[]) as t(id, token)
    where j.id = t.id and j.status = 'Running' and j.claim_token = t.token
    returning ${ctx.sql(COLUMNS.map((c) => `j.${c}`))}`;
  const settled = new Map(rows.map((r) => [r.id, r]));
  const out: Array<{ id: string } & SettleOutcome<SeoJobRow>> = [];
  for (const { id, token } of jobs) {
    const fenced = () => Promise.resolve(settled.get(id));
    const outcome = await settleByToken(ctx, tokenQueue, { verb: "give-back", id, token }, fenced);
    out.push({ id, ...outcome });
  }
  return out;
}

// This queue as settleByToken sees it: its name, and its re-read of a job with its token.
const tokenQueue: TokenQueue<SeoJobRow> = { name, reread };

// The job as it is now, with its token: what settleByToken reads after a fenced write missed.
async function reread(sql: Sql, id: string): Promise<(SeoJobRow & TokenState) | undefined> {
  const [row] = await sql<(SeoJobRow & TokenState)[]>`
    select ${sql(COLUMNS)}, claim_token from seo_backfill_jobs where id = ${id}`;
  return row;
}

/** Publish one of this queue's transitions once it committed (lib/claim_token.ts `publishJob`). */
export function publish(
  ctx: Pick<SeoContext, "events">,
  row: SeoJobRow,
  transition: Transition,
  runnableForS?: number | null,
): void {
  publishJob(ctx.events, name, row, transition, runnableForS);
}
