/**
 * What the ssg queue's render reads: the published editions and their chapters, as a
 * {@linkcode SiteSource} for site/render.ts. Reads only; the queue's own table is in ssg.ts.
 *
 * @module
 */
import type { QueueContext } from "../../lib/queue.ts";
import type { SiteSource } from "../../site/render.ts";
import type { EditionSummary } from "../../site/pages.tsx";

// A query cancelled (pg_cancel_backend through postgres.js) when `signal` aborts, so a shutdown
// never waits on a slow read.
async function abortable<T>(query: PromiseLike<T> & { cancel(): void }, signal: AbortSignal) {
  signal.throwIfAborted();
  const cancel = () => query.cancel();
  signal.addEventListener("abort", cancel, { once: true });
  try {
    return await query;
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw err;
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}

/** The published editions, read from Postgres for `renderSite`. */
export function siteSource(ctx: QueueContext): SiteSource {
  return {
    list: (signal) =>
      abortable(
        ctx.sql<EditionSummary[]>`
          select id, title, author, language, direction, meta_description as description, licence
          from editions
          where published_at is not null
          order by published_at desc, id desc`,
        signal,
      ),
    // One statement, so an edition's row and its chapters come from one snapshot even while it
    // is being re-ingested.
    load: async (id, signal) => {
      const [row] = await abortable(
        ctx.sql<
          {
            asset_version: number;
            assets_version: number;
            chapters: { position: number; title: string; html: string }[];
          }[]
        >`
          select e.asset_version, e.assets_version,
            (select coalesce(json_agg(json_build_object(
                      'position', c.position, 'title', c.title, 'html', c.html)
                    order by c.position), '[]'::json)
             from chapters c where c.edition_id = e.id) as chapters
          from editions e
          where e.id = ${id} and e.published_at is not null`,
        signal,
      );
      return row
        ? {
          assetVersion: row.asset_version,
          writtenVersion: row.assets_version,
          chapters: row.chapters,
        }
        : null;
    },
  };
}
