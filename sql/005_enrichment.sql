-- The metadata enrichment queue (ADR-022 row 3) lives on user_books itself. Statuses: null (not
-- Ready yet) → Pending → Running → Completed | Failed. See docs/queues/enrichment.md.

alter table user_books
  add column metadata_enrichment_status text
    check (metadata_enrichment_status in ('Pending', 'Running', 'Completed', 'Failed')),
  add column metadata_enrichment_attempt_count integer not null default 0
    check (metadata_enrichment_attempt_count >= 0),
  -- The per-boot id of the process whose claim is live; every settling write is fenced on it.
  add column metadata_enrichment_claimed_by uuid,
  add column metadata_enrichment_started_at timestamptz,
  add column metadata_enrichment_finished_at timestamptz,
  add column metadata_enrichment_error text,
  -- What the enricher produced: local fields always, remote ones when the remote engine is on.
  add column metadata jsonb;

-- The claim and the stale recovery scan only rows in the queue.
create index user_books_enrichment_claimable on user_books (id)
  where metadata_enrichment_status in ('Pending', 'Running');

-- Channel "<schema>.user_books": any statement that leaves a row Pending wakes the enricher (the
-- user ingestion's completing write, a give-back, a recovery, an admin retry).
create trigger user_books_enrichment_notify_insert
  after insert on user_books
  referencing new table as new_rows
  for each statement execute function notify_queue('Pending', 'metadata_enrichment_status');

create trigger user_books_enrichment_notify
  after update on user_books
  referencing new table as new_rows
  for each statement execute function notify_queue('Pending', 'metadata_enrichment_status');
