/**
 * The ingestion queue's post-commit effect: an edition's chapter assets on disk, derived from the
 * chapters the completing transaction saved. `editions.asset_version` names the version the
 * database holds; `editions.assets_version` the version completely written to disk. They differ
 * only while a write is under way, or after one was cut short (crash, shutdown, disk full) — then
 * {@linkcode repairAssets} rewrites the version from the database, which holds the truth: chapters
 * from `chapters`, the files they use from `resources` (sql/008_edition_fidelity.sql says why they
 * are kept there; `_ingestion_fidelity.ts` stores them in the completing transaction).
 *
 * @module
 */
import type { QueueContext } from "../../lib/queue.ts";
import { type AssetResource, removeOtherAssetVersions, writeAssets } from "../../books/assets.ts";

/** Editions repaired per call, so one wake never holds the queue for long. */
const REPAIRS_PER_WAKE = 10;
/** Longest one wake spends repairing assets, in ms; the rest waits for the next wake. */
export const REPAIR_BUDGET_MS = 2000;
/** Wait after a failed repair before the edition is tried again, in ms. */
export const REPAIR_RETRY_MS = 60_000;

/**
 * Write an edition's asset version, delete every other version, then record it as written.
 *
 * @param chapters `{ html }` per chapter, in order.
 * @param resources the files the chapters use (see `writeAssets`).
 * @param signal stops the write between files (it is then redone by {@linkcode repairAssets}).
 * @param fresh a new edition's first version: nothing was ever written under its id, so it is
 *   written straight into place and there is no other version to delete.
 * @throws the file-system error, or `signal.reason`.
 */
export async function publishAssets(
  ctx: QueueContext & { readonly storageDir: string },
  editionId: string,
  version: number,
  chapters: ReadonlyArray<{ html: string }>,
  resources: ReadonlyArray<AssetResource>,
  signal: AbortSignal,
  fresh = false,
): Promise<void> {
  await writeAssets(ctx.storageDir, editionId, version, chapters, resources, signal, {
    inPlace: fresh,
  });
  if (!fresh) await removeOtherAssetVersions(ctx.storageDir, editionId, version);
  // Fenced on the version: a newer ingest of the same edition must not be marked written by this.
  // A published edition's site needs a rebuild once its assets are complete (a rebuild refuses
  // to go live without them, queues/ssg/mod.ts): queued in the same statement, joining a Queued
  // Full rebuild when there is one (the one-Queued index) — and only when no other published
  // edition still lacks its assets, since that rebuild would fail for the same cause (the write
  // that completes the last of them queues it). Only a completed write queues one — never a
  // failed rebuild or a timer (ADR-022 removed the periodic trigger: a rebuild failing for good
  // was queued again forever).
  await ctx.sql`
    with written as (
      update editions set assets_version = ${version}
      where id = ${editionId} and asset_version = ${version} and assets_version <> ${version}
      returning published_at
    )
    insert into ssg_rebuild_jobs (kind)
    select 'Full' from written
    where published_at is not null
      and not exists (
        select 1 from editions
        where id <> ${editionId} and published_at is not null and assets_version <> asset_version)
    on conflict (kind) where status = 'Queued' do nothing`;
}

// A read the signal cancels (`pg_cancel_backend` through postgres.js's cancel request): a read
// waiting on a lock must not hold the wake past its budget.
async function bounded<T>(query: { cancel(): void } & Promise<T>, signal: AbortSignal): Promise<T> {
  const cancel = () => query.cancel();
  signal.addEventListener("abort", cancel, { once: true });
  try {
    return await query;
  } catch (err) {
    throw signal.aborted ? signal.reason : err;
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}

/**
 * Rewrite the assets of editions whose written version lags the saved one, until `signal`
 * aborts: it cancels the statement in progress and stops between files (the
 * repair is bounded by time; the caller passes its budget in the signal).
 *
 * @returns how many editions were repaired.
 * @throws `signal.reason` when it aborted during a read; the database error; a file-system error
 *   for one edition is logged, and that edition is not tried again for {@linkcode REPAIR_RETRY_MS}.
 */
export async function repairAssets(
  ctx: QueueContext & { readonly storageDir: string },
  signal: AbortSignal,
): Promise<number> {
  signal.throwIfAborted();
  const behind = await bounded(
    ctx.sql<{ id: string; asset_version: number }[]>`
      select id, asset_version from editions
      where assets_version <> asset_version
        and (assets_repair_after is null or assets_repair_after <= now())
      order by id
      limit ${REPAIRS_PER_WAKE}`,
    signal,
  );
  let repaired = 0;
  for (const edition of behind) {
    if (signal.aborted) break;
    const chapters = await bounded(
      ctx.sql<{ html: string }[]>`
        select html from chapters where edition_id = ${edition.id} order by position`,
      signal,
    );
    // Paths first, bytes one file at a time: an illustrated book's images need not all be in
    // memory at once.
    const resources = (await bounded(
      ctx.sql<{ path: string }[]>`
        select path from resources where edition_id = ${edition.id} order by path`,
      signal,
    )).map(({ path }): AssetResource => ({
      path,
      bytes: async () => {
        const [row] = await bounded(
          ctx.sql<{ bytes: Uint8Array }[]>`
            select bytes from resources where edition_id = ${edition.id} and path = ${path}`,
          signal,
        );
        return row?.bytes ?? new Uint8Array();
      },
    }));
    try {
      await publishAssets(ctx, edition.id, edition.asset_version, chapters, resources, signal);
      ctx.log.warn(
        { edition: edition.id, version: edition.asset_version },
        "asset version rewritten from the database",
      );
      repaired++;
    } catch (err) {
      if (signal.aborted) break;
      // A fault that outlives one try (a full disk) must not slow every claim: back off.
      await ctx.sql`
        update editions
        set assets_repair_after = now() + ${REPAIR_RETRY_MS} * interval '1 millisecond'
        where id = ${edition.id}`;
      ctx.log.error(
        { edition: edition.id, err, retryMs: REPAIR_RETRY_MS },
        "asset repair failed; retrying later",
      );
    }
  }
  return repaired;
}
