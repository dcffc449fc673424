/**
 * The auto-publish breaker (ADR-022 row 5: "5 failures / 24 h per edition"), the queue's attempts
 * cap, counted per edition instead of per job: its constants, and the statement ingestion's
 * completing save runs to create an edition's job under it. The API's create applies the same
 * rule in jobs.ts (`enqueue`), with the reason for a refusal. Re-exported by mod.ts.
 *
 * @module
 */
import type { Fragment, Sql, TxSql } from "../../lib/db.ts";

/** The breaker: this many `Failed` jobs of one edition inside the window refuse a new one. */
export const BREAKER_FAILURES = 5;
/** The breaker's window, in hours (ADR-022 row 5: "5 failures / 24 h per edition"). */
export const BREAKER_WINDOW_H = 24;

/**
 * The statement that creates an edition's job when its ingestion completes
 * (`AUTO_PUBLISH_ON_INGEST`), run as a part of the ingestion's completing statement, so it commits
 * with the edition or not at all, and costs no round trip of its own. Same refusals as
 * the API (jobs.ts `enqueue`): no second job while the edition has one `Queued` or `Running` (the
 * partial unique index), none while its breaker is open. A refusal writes nothing and the
 * ingestion still commits. The edition exists: the same statement saved it (its own rows are not
 * visible to this part's reads, hence no existence check here).
 *
 * @param sql the client the completing statement runs on.
 * @param editionId the saved edition's id as a SQL expression; NULL creates nothing.
 * @returns a data-modifying statement returning the created job's id (no row when refused).
 */
export function createOnIngest(sql: Sql | TxSql, editionId: Fragment): Fragment {
  return sql`
    insert into auto_publish_jobs (edition_id, priority)
    select e.id, 0 from (select ${editionId} as id) e
    where e.id is not null
      and (select count(*) from auto_publish_jobs
           where edition_id = e.id and status = 'Failed' and cancelled_at is null
             and finished_at > now() - ${BREAKER_WINDOW_H} * interval '1 hour')
          < ${BREAKER_FAILURES}
    on conflict (edition_id) where status in ('Queued', 'Running') do nothing
    returning id`;
}
