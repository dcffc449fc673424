/**
 * What the ingestion queue stores about an edition beyond its chapters (sql/
 * 008_edition_fidelity.sql): the resources the chapters use (language, direction and warnings are
 * written by the save's own statement); and the summary of an edition that
 * `GET /internal/ingestion/jobs/:id` returns.
 *
 * @module
 */
import type { Sql, TxSql } from "../../lib/db.ts";
import type { BookWarning, ExtractedBook } from "../../books/extract.ts";

/**
 * Resource bytes per insert statement. postgres.js sends bytea as hex text, twice this, held as a
 * string and a buffer while the statement is sent: 2 MiB keeps that ~8 MB of a 10 MB book's
 * ingest peak, where 8 MiB cost ~50 MB ("peak worker RSS ≤ 300 MB").
 */
const RESOURCE_BATCH_BYTES = 2 * 1024 * 1024;

/**
 * Store an edition's resources inside the transaction that saves it; the save's own
 * statement has already stored its language, direction and warnings and deleted a previous
 * ingest's resources (queues/ingestion/mod.ts: one statement for all of that).
 *
 * @param tx the completing transaction.
 * @param editionId the edition just inserted or updated.
 * @param resources the extracted book's resources; none sends no statement.
 * @throws the database error.
 */
export async function saveResources(
  tx: TxSql,
  editionId: string,
  resources: ExtractedBook["resources"] = [],
): Promise<void> {
  for (let i = 0; i < resources.length;) {
    // Batched by size, not count: one 20 MB scan and fifty 4 KB icons are both one book.
    const batch = [];
    for (
      let size = 0;
      i < resources.length && (batch.length === 0 || size < RESOURCE_BATCH_BYTES);
      i++
    ) {
      const { path, mediaType, bytes } = resources[i];
      batch.push({ edition_id: editionId, path, media_type: mediaType, bytes });
      size += bytes.length;
    }
    await tx`insert into resources ${tx(batch)}`;
  }
}

/** An edition as `GET /internal/ingestion/jobs/:id` shows it beside its job. */
export interface EditionSummary {
  id: string;
  title: string;
  author: string | null;
  format: string;
  language: string | null;
  direction: "ltr" | "rtl" | null;
  warnings: BookWarning[];
  chapter_count: number;
  resource_count: number;
}

/**
 * Read an edition's summary.
 *
 * @param editionId the edition's id.
 * @returns the summary, or `null` when there is no such edition.
 * @throws the database error.
 */
export async function readEditionSummary(
  sql: Sql,
  editionId: string,
): Promise<EditionSummary | null> {
  const [row] = await sql<EditionSummary[]>`
    select e.id, e.title, e.author, e.format, e.language, e.direction, e.warnings,
      (select count(*)::int from chapters c where c.edition_id = e.id) as chapter_count,
      (select count(*)::int from resources r where r.edition_id = e.id) as resource_count
    from editions e where e.id = ${editionId}`;
  return row ?? null;
}
