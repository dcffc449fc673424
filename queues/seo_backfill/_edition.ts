/**
 * The SEO backfill queue's statements on the edition itself (`editions`, `seo_before_snapshots`):
 * the edition as the SEO command reads it, a complete's apply with its BeforeSnapshot (ADR-022,
 * "SEO apply"), and the revert. mod.ts runs them; it re-exports {@linkcode revert}.
 *
 * @module
 */
import type { Sql, TxSql } from "../../lib/db.ts";
import { transaction } from "../../lib/db.ts";
import type { QueueContext } from "../../lib/queue.ts";

/** An edition's SEO fields (null when never set). */
export interface SeoFields {
  meta_title: string | null;
  meta_description: string | null;
  meta_keywords: string[] | null;
}

/** The edition as a claim returns it beside its job: what the SEO command reads. */
export interface SeoEdition extends SeoFields {
  id: string;
  title: string;
  author: string | null;
  format: string;
  /** The first chapter's text without markup, at most 2000 characters; "" when none. */
  excerpt: string;
}

/**
 * Apply a completed job's SEO fields to its edition, in the complete's transaction: lock the
 * edition, take its BeforeSnapshot if it has none, then write the fields.
 *
 * @param sql the complete's transaction.
 * @param editionId the job's edition (it exists: the job references it, on delete cascade).
 */
export async function applyFields(sql: TxSql, editionId: string, fields: SeoFields): Promise<void> {
  // Lock the edition first, so two applies to one edition (poller and crew) run one after the
  // other and the snapshot is always of the fields before either.
  await sql`select 1 from editions where id = ${editionId} for update`;
  await sql`
    insert into seo_before_snapshots (edition_id, meta_title, meta_description, meta_keywords)
    select id, meta_title, meta_description, meta_keywords from editions
    where id = ${editionId}
    on conflict (edition_id) do nothing`;
  await sql`
    update editions
    set meta_title = ${fields.meta_title}, meta_description = ${fields.meta_description},
        meta_keywords = ${fields.meta_keywords}, updated_at = now()
    where id = ${editionId}`;
}

/**
 * Restore an edition's SEO fields from its BeforeSnapshot and drop the snapshot, so the next apply
 * snapshots the restored originals again.
 *
 * @returns the restored fields; `nothing_to_revert` when the edition has no snapshot; `absent` when
 *   no edition has that id. Nothing changes but on `reverted`.
 */
export async function revert(
  ctx: Pick<QueueContext, "sql" | "log">,
  editionId: string,
): Promise<
  { outcome: "reverted"; edition: SeoFields & { id: string } } | {
    outcome: "nothing_to_revert" | "absent";
  }
> {
  return await transaction(ctx.sql, ctx.log, async (tx) => {
    const [edition] = await tx.sql<(SeoFields & { id: string })[]>`
      update editions e
      set meta_title = s.meta_title, meta_description = s.meta_description,
          meta_keywords = s.meta_keywords, updated_at = now()
      from seo_before_snapshots s
      where e.id = ${editionId} and s.edition_id = e.id
      returning e.id, e.meta_title, e.meta_description, e.meta_keywords`;
    if (edition) {
      await tx.sql`delete from seo_before_snapshots where edition_id = ${editionId}`;
      return { outcome: "reverted" as const, edition };
    }
    const [exists] = await tx.sql`select 1 from editions where id = ${editionId}`;
    return { outcome: exists ? "nothing_to_revert" as const : "absent" as const };
  });
}

/** The edition as the SEO command reads it ({@linkcode SeoEdition}), from `e` (the job's edition). */
export function editionJson(sql: Sql | TxSql) {
  return sql`jsonb_build_object(
      'id', e.id::text, 'title', e.title, 'author', e.author, 'format', e.format,
      'meta_title', e.meta_title, 'meta_description', e.meta_description,
      'meta_keywords', e.meta_keywords,
      'excerpt', coalesce((
        select left(btrim(regexp_replace(regexp_replace(ch.html, '<[^>]*>', ' ', 'g'),
                                         '\\s+', ' ', 'g')), 2000)
        from chapters ch where ch.edition_id = e.id order by ch.position limit 1), '')
    ) as edition`;
}
