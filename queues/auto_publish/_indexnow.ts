/**
 * The IndexNow client: tells search engines a URL changed (https://www.indexnow.org/documentation).
 * Auto-publish's complete records the ping in the outbox in its own transaction
 * ({@linkcode recordPing}); the outbox drain (lib/outbox.ts) delivers it after the commit, at least
 * once and once per edition and asset version — never from inside a transaction.
 *
 * @module
 */
import type { Sql, TxSql } from "../../lib/db.ts";

/** The outbox kind of a ping. */
export const OUTBOX_KIND = "indexnow";

/**
 * Record an edition's ping in the caller's transaction, keyed `edition-<id>-v<asset version>`: a
 * retried complete, or a second publish of the same version, records nothing new.
 *
 * @returns 1 when recorded, 0 when this edition and version already were (or no such edition).
 */
export async function recordPing(sql: Sql | TxSql, editionId: string): Promise<number> {
  const rows = await sql`
    insert into outbox (kind, dedup_key, payload)
    select ${OUTBOX_KIND}, 'edition-' || id || '-v' || asset_version,
           jsonb_build_object('edition_id', id::text, 'asset_version', asset_version)
    from editions where id = ${editionId}
    on conflict (kind, dedup_key) do nothing`;
  return rows.count;
}

/** Where and how to ping, from `INDEXNOW_URL`, `INDEXNOW_KEY` and `SITE_URL`. */
export interface IndexNowSettings {
  /** The IndexNow endpoint, e.g. `https://api.indexnow.org/indexnow`. */
  readonly url: string;
  /** The site's IndexNow key (served by the site at `/<key>.txt`). */
  readonly key: string;
  /** The public site's base URL, e.g. `https://textstack.example`, no trailing slash. */
  readonly siteUrl: string;
}

/** Longest one ping may take, in ms. */
export const PING_TIMEOUT_MS = 10_000;

/**
 * An edition's public URL on the static site.
 *
 * @param siteUrl base URL without a trailing slash.
 * @param editionId bigint id, as a string.
 * @returns e.g. `https://textstack.example/editions/12/`.
 */
export function editionUrl(siteUrl: string, editionId: string): string {
  return `${siteUrl}/editions/${editionId}/`;
}

/**
 * Submit URLs to IndexNow: `POST <url>` with `{ host, key, urlList }`.
 *
 * @param urls absolute URLs on `siteUrl`'s host.
 * @param signal aborts the request (shutdown); a {@linkcode PING_TIMEOUT_MS} timeout applies too.
 * @throws Error naming the status when the endpoint answers other than 2xx; the fetch error when
 *   it cannot be reached or the signal aborts.
 */
export async function ping(
  settings: IndexNowSettings,
  urls: string[],
  signal: AbortSignal,
): Promise<void> {
  const res = await fetch(settings.url, {
    method: "POST",
    headers: { "content-type": "application/json; charset=utf-8" },
    body: JSON.stringify({
      host: new URL(settings.siteUrl).host,
      key: settings.key,
      urlList: urls,
    }),
    signal: AbortSignal.any([signal, AbortSignal.timeout(PING_TIMEOUT_MS)]),
  });
  await res.body?.cancel();
  if (!res.ok) throw new Error(`IndexNow answered ${res.status} for ${urls.length} URL(s)`);
}
