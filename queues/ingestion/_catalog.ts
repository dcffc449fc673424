/**
 * The ingestion queue's catalog write: an extracted book turned into catalog rows — its edition
 * (title, author, format, language, direction, warnings, licence), its chapters and the resources
 * they use — by the one statement that also completes the job and may claim the next one
 * ({@linkcode complete}); once it has committed, the edition's chapter assets (_assets.ts) and
 * the completion's events. The job's other transitions are mod.ts's.
 *
 * @module
 */
import { type Fragment, runCancellable, type Sql, transaction, type TxSql } from "../../lib/db.ts";
import type { ClaimNext } from "../../lib/queue.ts";
import { ClaimLostError, publishClaimed, publishCompleted } from "../../lib/queue_flow.ts";
import type { ExtractedBook } from "../../books/extract.ts";
import { publishAssets } from "./_assets.ts";
import { saveResources } from "./_fidelity.ts";
import type { IngestionContext, IngestionJob } from "./mod.ts";
import { name } from "./_constants.ts";

/**
 * A part of the completing statement that another queue adds (auto-publish creates the
 * edition's job): it commits with the save or not at all, and costs no round trip.
 */
export interface EditionSavedHook {
  /**
   * @param sql the client the completing statement runs on.
   * @param editionId the saved edition's id, as a SQL expression (NULL when nothing was saved).
   * @returns a data-modifying statement; its rows are counted for {@linkcode report}.
   */
  statement(sql: Sql | TxSql, editionId: Fragment): Fragment;
  /** Called once the save committed, with the edition and the statement's row count. */
  report(editionId: string, rows: number): void;
}

/**
 * The queue's claim as a part of the completing statement (mod.ts `claimStatement`).
 *
 * @param where the lock's fence and what else the chained claim requires.
 */
export type ClaimStatement = (sql: Sql | TxSql, where: Fragment) => Fragment;

/** What the completing statement answers: the fence, the saved edition, the chained job. */
interface Saved {
  /** The fence matched (the job was still this run's claim). */
  fenced: boolean;
  /** The saved edition; null only when the fence missed or a re-ingested edition is gone. */
  edition_id: string | null;
  asset_version: number | null;
  /** A new edition (nothing of it can be on disk yet), not a re-ingest. */
  created: boolean;
  /** Rows the {@linkcode EditionSavedHook}'s statement returned. */
  hooked: number;
  /** The chained claim's job, all null when it claimed none. */
  next_id: string | null;
  next_source_path: string | null;
  next_edition_id: string | null;
  next_attempt_count: number | null;
  next_claimed_by: string | null;
  next_runnable_for_s: number | null;
}

/** A saved edition, as the committed statement answered. */
interface SavedEdition {
  readonly id: string;
  readonly assetVersion: number;
  /** A new edition (nothing of it can be on disk yet), not a re-ingest. */
  readonly created: boolean;
  /** The chained claim's job; null when it claimed none (or did not chain). */
  readonly next: IngestionJob | null;
  /** Whether the statement chained a claim (`claimNext` gave a fence). */
  readonly chained: boolean;
}

/**
 * Save the book: its edition, chapters and resources, the job `Completed` and the chained claim,
 * fenced on the job as its run claimed it, in one commit. With no resources the statement is the
 * transaction; with resources they are inserted after it, in the same transaction. Then the
 * {@linkcode EditionSavedHook} hears of the commit.
 *
 * @param claimNext the consumer's leave (absent, or answering null: nothing is chained).
 * @param claim the queue's claim statement, for the chained claim.
 * @returns the saved edition and the chained job.
 * @throws {ClaimLostError} when the fence matched no row (nothing was written); an `Error` when
 *   the re-ingested edition does not exist; the database error or `signal.reason`.
 */
async function saveEdition(
  ctx: IngestionContext,
  job: IngestionJob,
  book: ExtractedBook,
  signal: AbortSignal,
  claimNext: ClaimNext | undefined,
  claim: ClaimStatement,
): Promise<SavedEdition> {
  const resources = book.resources ?? [];
  let chained = false;
  const statement = (sql: Sql | TxSql) => {
    const fence = claimNext?.(sql) ?? null;
    chained = fence !== null;
    return sql<Saved[]>`${saveStatement(ctx, sql, job, book, fence, claim)}`;
  };
  // The statement writes nothing unless its fence matched and the edition was saved, so when
  // either is missing there is nothing to roll back, even where it committed on its own.
  const check = (saved: Saved): { id: string; assetVersion: number } => {
    if (!saved.fenced) throw new ClaimLostError(`Lost the claim on ingestion job ${job.id}`);
    // ingestion_jobs.edition_id references editions, so the edition cannot vanish under the job.
    if (!saved.edition_id || saved.asset_version === null) {
      throw new Error(`Cannot re-ingest: edition ${job.edition_id} does not exist`);
    }
    return { id: saved.edition_id, assetVersion: saved.asset_version };
  };
  let saved: Saved;
  if (resources.length === 0) {
    // Nothing else to write: the statement is the transaction.
    [saved] = await runCancellable(ctx.sql, statement, signal);
    check(saved);
  } else {
    saved = await transaction(ctx.sql, ctx.log, async (tx) => {
      const [row] = await statement(tx.sql);
      await saveResources(tx.sql, check(row).id, resources);
      return row;
    }, signal);
  }
  // Committed from here on.
  const edition = check(saved);
  ctx.onEditionSaved?.report(edition.id, saved.hooked);
  const next: IngestionJob | null = saved.next_id === null ? null : {
    id: saved.next_id,
    source_path: saved.next_source_path!,
    edition_id: saved.next_edition_id,
    attempt_count: saved.next_attempt_count!,
    claimed_by: saved.next_claimed_by!,
    runnable_for_s: saved.next_runnable_for_s,
  };
  return { ...edition, created: saved.created, next, chained };
}

/**
 * Complete a job with the book it read: save the edition ({@linkcode saveEdition}); once that
 * has committed, write its chapter assets (a failed or interrupted write is logged and redone by
 * the queue's recovery), then publish the completion and the chained claim.
 *
 * @param claimNext the consumer's leave (absent, or answering null: nothing is chained).
 * @param claim the queue's claim statement, for the chained claim.
 * @returns the chained job, or null when the chained claim found none; nothing when it did not
 *   chain.
 * @throws what {@linkcode saveEdition} throws (nothing is committed then).
 */
export async function complete(
  ctx: IngestionContext,
  job: IngestionJob,
  book: ExtractedBook,
  signal: AbortSignal,
  claimNext: ClaimNext | undefined,
  claim: ClaimStatement,
): Promise<IngestionJob | null | undefined> {
  const edition = await saveEdition(ctx, job, book, signal, claimNext, claim);
  try {
    await publishAssets(
      ctx,
      edition.id,
      edition.assetVersion,
      book.chapters,
      book.resources ?? [],
      signal,
      edition.created,
    );
  } catch (err) {
    // The database holds the chapters: recover() rewrites the assets on the next poll tick.
    if (signal.aborted) {
      ctx.log.info(
        { queue: name, edition: edition.id },
        "asset write interrupted; it will be redone",
      );
    } else {
      ctx.log.error(
        { queue: name, edition: edition.id, err },
        "asset write failed; it will be redone",
      );
    }
  }
  publishCompleted(ctx, name, job);
  if (edition.next) {
    publishClaimed(ctx, name, "Processing", edition.next, edition.next.runnable_for_s);
  }
  ctx.log.info({ queue: name, id: job.id, chapters: book.chapters.length }, "job completed");
  return edition.chained ? edition.next : undefined;
}

// The completing statement: fence, edition, chapters, `Completed`, the hook's part and the
// chained claim, one round trip (it was nine statements in a transaction). Its parts, in
// the order they take effect:
// - `job`: the fence. It also row-locks the job, so a concurrent give-back waits and then matches
//   nothing, instead of un-counting a completed job. Every write below depends on it.
// - `created` / `updated`: a new edition (asset version 1) or the re-ingested one (version + 1),
//   with what the chapters alone do not hold (language, direction, warnings; and the
//   licence, kept beside the chapters, never in them).
// - `chapters`: one row per chapter from two arrays (no per-row parameters, so a 2,000-chapter
//   book is one statement too). A re-ingest overwrites positions it has, and `tail` deletes the
//   positions past its end: no row is both deleted and inserted by this one statement, whose
//   parts all see the same snapshot (a delete-then-insert of one key here would collide).
// - `stale_resources`: a re-ingest's old resources; new ones are inserted after this statement,
//   in the same transaction.
// - `completed`: the job's own row, which names the edition it made.
// - `hooked`: the part another queue adds (auto-publish creates the edition's job).
// - `next`: the chained claim, under the lock's fence (`false` when not chaining), and only once
//   `completed` matched: the `exists` is evaluated before the claim's scan, so `completed` has
//   run by then, and the claim's `for update` skips the row this statement updated — the stale
//   branch can never hand back this very job (tests/lib/cost_test.ts).
function saveStatement(
  ctx: IngestionContext,
  sql: Sql | TxSql,
  job: IngestionJob,
  book: ExtractedBook,
  fence: Fragment | null,
  claim: ClaimStatement,
): Fragment {
  const warnings = (book.warnings ?? []).map(({ kind, message }) => ({ kind, message }));
  const editionId = job.edition_id;
  const chained = fence ? sql`${fence} and exists (select from completed)` : sql`false`;
  const hook = ctx.onEditionSaved?.statement(sql, sql`(select id from edition)`) ??
    sql`select where false`;
  return sql`
    with job as (
      select id from ingestion_jobs
      where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}
      for update
    ),
    created as (
      insert into editions
        (title, author, format, language, direction, warnings, licence, asset_version)
      select ${book.title}, ${book.author}, ${book.format}, ${book.language ?? null},
             ${book.direction ?? null}, ${sql.json(warnings)}, ${book.licence ?? null}, 1
      from job where ${editionId}::bigint is null
      returning id, asset_version
    ),
    updated as (
      update editions
      set title = ${book.title}, author = ${book.author}, format = ${book.format},
          language = ${book.language ?? null}, direction = ${book.direction ?? null},
          warnings = ${sql.json(warnings)}, licence = ${book.licence ?? null},
          asset_version = asset_version + 1, updated_at = now()
      where id = ${editionId}::bigint and exists (select from job)
      returning id, asset_version
    ),
    edition as (
      select id, asset_version, true as created from created
      union all
      select id, asset_version, false from updated
    ),
    chapters as (
      insert into chapters (edition_id, position, title, html)
      select edition.id, c.position::int, c.title, c.html
      from edition,
        unnest(${sql.array(book.chapters.map((c) => c.title))}::text[],
               ${sql.array(book.chapters.map((c) => c.html))}::text[])
          with ordinality as c(title, html, position)
      on conflict (edition_id, position) do update set title = excluded.title, html = excluded.html
    ),
    tail as (
      delete from chapters
      where edition_id = (select id from updated) and position > ${book.chapters.length}
    ),
    stale_resources as (
      delete from resources where edition_id = (select id from updated)
    ),
    completed as (
      update ingestion_jobs j
      set status = 'Completed', error = null, claimed_by = null, finished_at = now(),
          updated_at = now(), edition_id = edition.id
      from edition
      where j.id = (select id from job)
      returning j.id
    ),
    hooked as (${hook}),
    next as (${claim(sql, chained)})
    select exists (select from job) as fenced, edition.id as edition_id, edition.asset_version,
           coalesce(edition.created, false) as created, (select count(*)::int from hooked) as hooked,
           next.id as next_id, next.source_path as next_source_path,
           next.edition_id as next_edition_id, next.attempt_count as next_attempt_count,
           next.claimed_by as next_claimed_by, next.runnable_for_s as next_runnable_for_s
    from (select) as one
      left join edition on true
      left join next on true`;
}
