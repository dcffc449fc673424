/**
 * The IndexNow client: tells search engines a URL changed (https://www.indexnow.org/documentation).
 * Best effort: auto-publish calls it through a bounded channel and a hosted drain after its commit
 * (ADR-052), never inside a transaction.
 *
 * @module
 */

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
