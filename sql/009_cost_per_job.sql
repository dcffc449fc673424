-- The per-job cost at its floor: indexes that keep the ingestion sweeps independent of the
-- backlog, and NOTIFY triggers that cost nothing on the writes that cannot wake anyone.

-- The stale sweep (queues/ingestion/_recovery.ts recover(), at lock acquisition and on the poll tick) reads
-- only Processing rows, at most a handful: with 100,000 Queued rows it used to walk them all
-- through ingestion_jobs_claimable (3.8 ms with 20,000 queued).
create index ingestion_jobs_processing on ingestion_jobs (claimed_at) where status = 'Processing';

-- Every job row is updated at least twice (the claim, the completion), never in place (status
-- is in the partial indexes' predicates). On a full page each new version moves to another page:
-- a free-space-map search, a second heap page, a second visibility-map bit. With room left on
-- each page (and the page pruned as it is visited) the versions stay where the row is; measured
-- by `deno task bench` (scale): with 100,000 queued rows a claim touched 21.6 buffers against
-- 14.2 on an empty table, and 17.5 against 15.5 with this. New pages only: no rewrite.
alter table ingestion_jobs set (fillfactor = 80);

-- Retention (INGESTION_RETENTION_DAYS, queues/ingestion/_retention.ts prune()): the oldest finished jobs,
-- found without reading the rest of the table, however many finished rows it holds.
create index ingestion_jobs_finished on ingestion_jobs (finished_at)
  where status in ('Completed', 'Failed');

-- notify_queue_row(): one empty NOTIFY on "<schema>.<table>", for a row-level trigger whose WHEN
-- clause says the row is now runnable. The statement-level triggers it replaces on UPDATE captured
-- every updated row in a transition table and ran a PL/pgSQL query over it on every claim and
-- every completion, which can never wake anyone; a WHEN clause that is false costs neither.
-- PostgreSQL folds identical notifications of one transaction into one, so a statement that
-- re-queues many rows still sends one. The INSERT triggers stay statement-level (one NOTIFY per
-- batch insert; they are on the producer's path, not the consumer's).
create function notify_queue_row() returns trigger
language plpgsql as $$
begin
  perform pg_notify(tg_table_schema || '.' || tg_table_name, '');
  return null;
end
$$;

drop trigger ingestion_jobs_notify_update on ingestion_jobs;
create trigger ingestion_jobs_notify_update
  after update on ingestion_jobs
  for each row when (new.status = 'Queued')
  execute function notify_queue_row();

drop trigger ssg_rebuild_jobs_notify_update on ssg_rebuild_jobs;
create trigger ssg_rebuild_jobs_notify_update
  after update on ssg_rebuild_jobs
  for each row when (new.status = 'Queued')
  execute function notify_queue_row();

drop trigger user_ingestion_jobs_notify_update on user_ingestion_jobs;
create trigger user_ingestion_jobs_notify_update
  after update on user_ingestion_jobs
  for each row when (new.status = 'Queued')
  execute function notify_queue_row();

drop trigger user_books_enrichment_notify on user_books;
create trigger user_books_enrichment_notify
  after update on user_books
  for each row when (new.metadata_enrichment_status = 'Pending')
  execute function notify_queue_row();
