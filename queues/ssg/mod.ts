/**
 * The static-site rebuild queue: table `ssg_rebuild_jobs` (sql/003_ssg.sql), consumed by this
 * process's one ssg consumer (lib/consumer.ts, the "ssg-worker" of ADR-022), fed by
 * `POST /internal/ssg/rebuild-all` and by every publish or unpublish ({@linkcode publishEdition}).
 * Only `Full` jobs (ADR-022 row 4, as shipped 2026-10-08; ADR-023 removed per-edit jobs). No
 * periodic or automatic trigger exists (ADR-022: rebuilds are manual or follow a publish).
 *
 * Transitions:
 * - (none) → Queued: {@linkcode enqueue} (rebuild-all, {@linkcode publishEdition}). At most one
 *   `Queued` Full job exists (partial unique index); a request while one is queued reuses it, and
 *   a publish while one is `Running` queues one follow-up.
 * - Queued → Running: {@linkcode claim} (counts the attempt, stamps `claimed_by`), the ADR's
 *   scalar-sub-select claim.
 * - Running → Completed: {@linkcode run}, fenced, in the transaction that switches the live site.
 * - Running → Failed: {@linkcode run} when the render fails or exceeds `SSG_TIMEOUT_MS` (a hung
 *   render ends Failed, ADR-022), or when a published edition's assets are not written
 *   ({@linkcode MISSING_ASSETS}: the previous build stays live, the editions are named; the asset
 *   write that completes the last of them queues the rebuild, queues/ingestion/_assets.ts);
 *   {@linkcode recover} for any `Running` row.
 * - Running → Queued: {@linkcode giveBack} on shutdown (attempt not counted, no error text); a
 *   follow-up already `Queued` is coalesced into the given-back job (deleted: the given-back job
 *   re-runs after the follow-up's write and renders it).
 * - Failed → Queued: {@linkcode retry}, the admin retry (attempts reset, error cleared);
 *   {@linkcode bulkRetry} retries the newest matching `Failed` job only (one Full rebuild renders
 *   everything), and none while one is `Queued`.
 * - Queued → Failed: {@linkcode cancel}, the admin cancel; a `Running` render is stopped first and
 *   settled by {@linkcode cancelRun} (fenced; the live site is left as it was).
 *
 * Recovery runs before every claim, not only at startup (ADR-022, "shipped 2026-10-08"): the
 * consumer is sequential and calls {@linkcode recover} on every wake before it claims, so any
 * `Running` row it finds is dead — `Failed` with `interrupted (not owned by the running
 * ssg-worker)`. No stale age, no attempts cap: a failed rebuild waits for an admin retry or the
 * next publish. {@linkcode recoverOrphans}, run once each time the consumer takes its lock, first
 * gives back the rows this same boot left `Running` (its run was aborted by a lost lock and its
 * give-back did not land); the sweep then fails the rest.
 *
 * @module
 */
import type { QueueDefaults } from "../../lib/config.ts";
import { type Fragment, transaction } from "../../lib/db.ts";
import { CANCELLED, type ClaimedJob, type QueueContext } from "../../lib/queue.ts";
import {
  claimed,
  ClaimLostError,
  publishCompleted,
  publishRecovered,
  runFault,
} from "../../lib/queue_flow.ts";
// The renderer (htmlparser2, dom-serializer, Hono's JSX: about 6 MB) is loaded by the first
// render, not at startup.
import { buildsDir, finishBuild, pruneBuilds, startBuild, switchLive } from "../../site/builds.ts";
import { siteSource } from "./_site.ts";
import { jobError } from "../../lib/job_error.ts";

/** Queue name used in logs, events and the lock key. */
export const name = "ssg";
/** The queue table; NOTIFY channel `<schema>.ssg_rebuild_jobs`. */
export const table = "ssg_rebuild_jobs";
/**
 * Settings: `SSG_TIMEOUT_MS` (default 10 min: then the render is `Failed`, ADR-022). No stale
 * rule, so no `SSG_STALE_AFTER_MS`: every `Running` row is dead before a claim, at any age; a set
 * value stops startup.
 */
export const defaults: QueueDefaults<null> = {
  envPrefix: "SSG",
  staleAfterMs: null,
  timeoutMs: 600_000,
  without: {
    staleAfterMs: "the ssg queue has no stale rule (every Running row is failed before each " +
      "claim, at any age; SSG_TIMEOUT_MS bounds a render)",
  },
};
/**
 * How a rebuild refused for missing assets begins its error; the rest names the editions. The
 * build never goes live: the site keeps its previous build.
 */
export const MISSING_ASSETS = "Cannot rebuild the site from incomplete inputs: ";

/** The error {@linkcode recover} writes (ADR-022, "shipped 2026-10-08"). */
export const INTERRUPTED = "interrupted (not owned by the running ssg-worker)";

/** Statuses of `ssg_rebuild_jobs.status`. */
export type SsgStatus = "Queued" | "Running" | "Completed" | "Failed";

/** What this queue's verbs need beyond {@linkcode QueueContext}. */
export interface SsgContext extends QueueContext {
  /** Root of the chapter assets (`editions/<id>/v<version>/`). */
  readonly storageDir: string;
  /** The live site: a symlink to the current build (site/builds.ts). */
  readonly siteDir: string;
  /** Absolute base URL ending in `/`, for the sitemap. */
  readonly siteUrl: string;
  /** Called after each file a render writes, with its path in the build (progress). */
  readonly onFile?: (path: string) => void;
}

/** A claimed job, as the claim wrote it (the fence for every later write). */
export interface SsgJob extends ClaimedJob {
  readonly claimed_by: string;
}

/** A job row as the API shows it. */
export interface SsgJobRow {
  /** bigint id, as a string. */
  id: string;
  kind: "Full";
  status: SsgStatus;
  attempt_count: number;
  error: string | null;
  claimed_by: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Every attempt that ended, oldest first (the last 20; sql/012_operations.sql). */
  attempts: unknown[];
}

/** A job as the list route shows it. */
export interface SsgListRow extends SsgJobRow {
  /** `Full rebuild`. */
  subject: string;
}

/**
 * Fail every `Running` row: the consumer calls this before every claim and runs one job at a
 * time, so none of them is in progress (ADR-022, "Recovery runs before every claim").
 */
export async function recover(ctx: SsgContext, _signal: AbortSignal): Promise<void> {
  const rows = await ctx.sql<{ id: string; attempt_count: number }[]>`
    update ssg_rebuild_jobs
    set status = 'Failed', error = ${INTERRUPTED}, claimed_by = null, finished_at = now(),
        updated_at = now()
    where status = 'Running'
    returning id, attempt_count`;
  publishRecovered(ctx, name, rows, "Failed", "interrupted job failed", INTERRUPTED);
}

/**
 * Give back the rows this same boot left `Running`, once each time the consumer takes its lock: a
 * run aborted by a lost lock whose give-back did not land is a shutdown of that run, not a
 * crash. Rows of other boots are left to {@linkcode recover}, which fails them. So every scope
 * (lib/consumer.ts `OrphanScope`) is `"own"` here, and the parameter is not read.
 */
export async function recoverOrphans(ctx: SsgContext, _signal: AbortSignal): Promise<void> {
  const own = await ctx.sql<SsgJob[]>`
    select id, attempt_count, claimed_by from ssg_rebuild_jobs
    where status = 'Running' and claimed_by = ${ctx.bootId}`;
  for (const job of own) {
    if (await giveBack(ctx, job)) ctx.log.info({ queue: name, id: job.id }, "job given back");
  }
}

/**
 * Claim the oldest `Queued` job, in the ADR's shape: one UPDATE whose scalar sub-select takes the
 * row with SKIP LOCKED, so the claim and its counted attempt commit together and exactly one row
 * is taken (docs/development.md), plus the `claimed_by` fence every queue has.
 *
 * @param lockHeld the queue lock's claim fence (lib/lock.ts): without the lock, nothing is claimed.
 *   Omitted only by tests that call the verb directly.
 * @returns the claimed job, or null when none is queued.
 */
export async function claim(ctx: SsgContext, lockHeld?: Fragment): Promise<SsgJob | null> {
  const [row] = await ctx.sql<(SsgJob & { runnable_for_s: number | null })[]>`
    update ssg_rebuild_jobs
    set status = 'Running', started_at = now(), attempt_count = attempt_count + 1,
        claimed_by = ${ctx.bootId}, finished_at = null, updated_at = now()
    where id = (
      select id from ssg_rebuild_jobs
      where ${lockHeld ?? ctx.sql`true`} and status = 'Queued'
      order by created_at, id
      limit 1
      for update skip locked
    )
    returning id, attempt_count, claimed_by, (
      -- The wake latency: a subquery in RETURNING reads the statement's snapshot, so it
      -- sees the row as it was before this claim: runnable since its last write (insert,
      -- give-back, retry).
      select extract(epoch from now() - o.updated_at)::float8
      from ssg_rebuild_jobs o where o.id = ssg_rebuild_jobs.id and o.status = 'Queued'
    ) as runnable_for_s`;
  return claimed(ctx, name, "Running", row);
}

/**
 * Give a claimed job back on shutdown: `Queued`, the attempt un-counted, no error text, fenced on
 * the row as this run claimed it. A follow-up already `Queued` (a publish during the run) is
 * deleted in the same transaction — at most one `Queued` job may exist, and the given-back job,
 * running later, renders that publish too.
 *
 * @returns false when the fence matched no row (the claim was lost; logged, never "fixed").
 */
export async function giveBack(ctx: SsgContext, job: SsgJob): Promise<boolean> {
  for (let tries = 1;; tries++) {
    try {
      return await transaction(ctx.sql, ctx.log, async (tx) => {
        const [mine] = await tx.sql`
          select id from ssg_rebuild_jobs
          where id = ${job.id} and status = 'Running' and attempt_count = ${job.attempt_count}
            and claimed_by = ${job.claimed_by}
          for update`;
        if (!mine) {
          ctx.log.warn(
            { queue: name, id: job.id, transition: "given_back" },
            "settling write matched no row: the claim was lost",
          );
          return false;
        }
        const coalesced = await tx.sql<{ id: string }[]>`
          delete from ssg_rebuild_jobs where kind = 'Full' and status = 'Queued' returning id`;
        await tx.sql`
          update ssg_rebuild_jobs
          set status = 'Queued', attempt_count = attempt_count - 1, error = null,
              claimed_by = null, started_at = null, updated_at = now()
          where id = ${job.id}`;
        tx.afterCommit(() => {
          for (const { id } of coalesced) {
            ctx.log.info({ queue: name, id, into: job.id }, "queued follow-up coalesced");
          }
          ctx.events.publish({
            queue: name,
            id: job.id,
            transition: "given_back",
            status: "Queued",
            attempt: job.attempt_count - 1,
          });
        });
        return true;
      });
    } catch (err) {
      // A publish queued a new follow-up between our delete and update: try once more.
      if ((err as { code?: unknown }).code === "23505" && tries < 3) continue;
      throw err;
    }
  }
}

/**
 * Settle a render an admin cancelled, once it has stopped (its unfinished build removed, the live
 * site untouched): `Failed` with {@linkcode CANCELLED}. Fenced on the claim.
 *
 * @returns false when the fence matched no row.
 */
export async function cancelRun(ctx: SsgContext, job: SsgJob): Promise<boolean> {
  return await fail(ctx, job, CANCELLED, "cancelled");
}

/**
 * Rebuild the site: render every published edition into a fresh build, then — in one fenced
 * transaction — mark the job `Completed` and switch the live site to the build (site/builds.ts);
 * keep the previous build, prune older ones. A failed render is `Failed` with the reason.
 *
 * @param signal aborted on shutdown or a lost lock: the run removes its unfinished build, leaves
 *   the live site untouched and rejects with the reason (the consumer gives the claim back). A
 *   run timeout (`SSG_TIMEOUT_MS`) is `Failed` instead.
 * @throws the signal's reason when aborted for shutdown.
 */
export async function run(ctx: SsgContext, job: SsgJob, signal: AbortSignal): Promise<void> {
  let unfinished: string | undefined;
  try {
    unfinished = await startBuild(ctx.siteDir);
    const { renderSite } = await import("../../site/render.ts");
    const summary = await renderSite({
      dir: unfinished,
      siteUrl: ctx.siteUrl,
      storageDir: ctx.storageDir,
      source: siteSource(ctx),
      signal,
      onFile: ctx.onFile,
    });
    signal.throwIfAborted();
    const build = await finishBuild(ctx.siteDir, unfinished, job.id);
    unfinished = `${buildsDir(ctx.siteDir)}/${build}`;
    signal.throwIfAborted();
    const previous = await complete(ctx, job, build);
    unfinished = undefined;
    const pruned = await pruneBuilds(ctx.siteDir, [build, ...(previous ? [previous] : [])])
      .catch((err) => (ctx.log.error({ queue: name, err }, "pruning old builds failed"), []));
    ctx.log.info({ queue: name, id: job.id, build, previous, pruned, ...summary }, "site rebuilt");
  } catch (err) {
    if (unfinished) await Deno.remove(unfinished, { recursive: true }).catch(() => {});
    const fault = runFault(ctx, name, job.id, err, signal);
    if (fault === "lost") return;
    if (fault === "timeout") {
      await fail(ctx, job, `Render exceeded SSG_TIMEOUT_MS: ${signal.reason.message}`);
      return;
    }
    if ((err as Error)?.name === "MissingAssetsError") {
      await fail(
        ctx,
        job,
        `${MISSING_ASSETS}${(err as Error).message}; the live site keeps its previous build, ` +
          "and completing those assets (the ingestion's asset write or repair) queues a rebuild",
      );
      return;
    }
    await fail(ctx, job, `Cannot rebuild the site: ${(err as Error)?.message ?? err}`);
  }
}

// The fence first (it also row-locks the job, so a concurrent give-back waits and then matches
// nothing), then the switch: it happens only for a run that still owns its claim, and if it
// throws the transaction rolls back and the job is failed with the reason. A commit that fails
// after the switch leaves a correct site and a job that runs again.
async function complete(ctx: SsgContext, job: SsgJob, build: string): Promise<string | null> {
  return await transaction(ctx.sql, ctx.log, async (tx) => {
    const fenced = await tx.sql`
      update ssg_rebuild_jobs
      set status = 'Completed', error = null, claimed_by = null, finished_at = now(),
          updated_at = now()
      where id = ${job.id} and status = 'Running' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}`;
    if (fenced.count === 0) throw new ClaimLostError(`Lost the claim on ssg job ${job.id}`);
    const previous = await switchLive(ctx.siteDir, build);
    tx.afterCommit(() => publishCompleted(ctx, name, job));
    return previous;
  });
}

async function fail(
  ctx: SsgContext,
  job: SsgJob,
  why: string,
  transition: "failed" | "cancelled" = "failed",
): Promise<boolean> {
  const reason = jobError(why, ctx.storageDir);
  const rows = await ctx.sql`
    update ssg_rebuild_jobs
    set status = 'Failed', error = ${reason}, claimed_by = null, finished_at = now(),
        updated_at = now()
    where id = ${job.id} and status = 'Running' and attempt_count = ${job.attempt_count}
      and claimed_by = ${job.claimed_by}`;
  if (rows.count === 0) {
    ctx.log.warn(
      { queue: name, id: job.id, transition: "failed" },
      "settling write matched no row: the claim was lost",
    );
    return false;
  }
  ctx.log.warn({ queue: name, id: job.id, reason }, "job failed");
  ctx.events.publish({
    queue: name,
    id: job.id,
    transition,
    status: "Failed",
    attempt: job.attempt_count,
    error: reason,
  });
  return true;
}
