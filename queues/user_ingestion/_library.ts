/**
 * The user ingestion queue's library write: a reader's book as its chapter assets on disk
 * ({@linkcode writeChapterAssets}, before the commit) and its rows — the chapters, the book
 * `Ready` with its title, author and format, its enrichment `Pending` — in the transaction that
 * completes the job ({@linkcode save}). The job's other transitions are mod.ts's.
 *
 * @module
 */
import { join } from "node:path";
import { transaction } from "../../lib/db.ts";
import { ClaimLostError, publishCompleted } from "../../lib/queue_flow.ts";
import type { ExtractedBook } from "../../books/extract.ts";
import type { UserIngestionContext, UserIngestionJob } from "./mod.ts";
import { name } from "./_constants.ts";

/** The directory of a user book's chapter assets: `<storage>/user-books/<id>/`. */
export function userBookDir(storageDir: string, userBookId: string): string {
  return join(storageDir, "user-books", userBookId);
}

/**
 * Write a book's chapters as `<n>.html` under {@linkcode userBookDir}, each renamed into place
 * from a staging file: a re-run writes the same files.
 *
 * @throws the file-system error, or `signal.reason` between files.
 */
export async function writeChapterAssets(
  storageDir: string,
  userBookId: string,
  book: ExtractedBook,
  signal: AbortSignal,
): Promise<void> {
  const dir = userBookDir(storageDir, userBookId);
  await Deno.mkdir(dir, { recursive: true });
  for (const [i, chapter] of book.chapters.entries()) {
    signal.throwIfAborted();
    const staging = join(dir, `.${i + 1}.html-${crypto.randomUUID()}`);
    await Deno.writeTextFile(staging, chapter.html);
    await Deno.rename(staging, join(dir, `${i + 1}.html`));
  }
}

/**
 * Complete the job: fenced on the claim, the job `Completed`, the chapters replaced, the book
 * `Ready` and its enrichment `Pending`, in one transaction; its event once that has committed.
 *
 * @throws {ClaimLostError} when the fence matched no row (nothing is written); the database
 *   error or `signal.reason`.
 */
export async function save(
  ctx: UserIngestionContext,
  job: UserIngestionJob,
  book: ExtractedBook,
  signal: AbortSignal,
): Promise<void> {
  await transaction(ctx.sql, ctx.log, async (tx) => {
    // The fence first: it also row-locks the job, so a concurrent give-back waits and then
    // matches nothing, instead of un-counting a completed job.
    const fenced = await tx.sql`
      update user_ingestion_jobs
      set status = 'Completed', error = null, claimed_by = null, finished_at = now(),
          updated_at = now()
      where id = ${job.id} and status = 'Processing' and attempt_count = ${job.attempt_count}
        and claimed_by = ${job.claimed_by}`;
    if (fenced.count === 0) {
      throw new ClaimLostError(`Lost the claim on user ingestion job ${job.id}`);
    }
    await tx.sql`delete from user_chapters where user_book_id = ${job.user_book_id}`;
    const rows = book.chapters.map((c, i) => ({
      user_book_id: job.user_book_id,
      position: i + 1,
      title: c.title,
      html: c.html,
    }));
    for (let i = 0; i < rows.length; i += 500) {
      await tx.sql`insert into user_chapters ${tx.sql(rows.slice(i, i + 500))}`;
    }
    // Ready and enrichment Pending in one statement of this commit; the statement's
    // NOTIFY on <schema>.user_books wakes the enricher once it commits.
    await tx.sql`
      update user_books
      set status = 'Ready', error = null, title = ${book.title}, author = ${book.author},
          format = ${book.format}, updated_at = now(),
          metadata_enrichment_status = 'Pending', metadata_enrichment_attempt_count = 0,
          metadata_enrichment_error = null
      where id = ${job.user_book_id}`;
    tx.afterCommit(() => publishCompleted(ctx, name, job));
  }, signal);
  ctx.log.info({ queue: name, id: job.id, chapters: book.chapters.length }, "job completed");
}
