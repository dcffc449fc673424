-- The enrichment provider client (queues/enrichment/_remote.ts, docs/enrichment.md).

alter table user_books
  -- The intent whose attempts are running: part of every request's Idempotency-Key
  -- (book-<id>-<intent>-attempt-<n>). A new uuid at every admin retry, so a retried book is a new
  -- intent and never gets a provider's stored answer to the attempt that failed.
  add column metadata_enrichment_intent uuid not null default gen_random_uuid(),
  -- A Pending book is not claimed before this moment: the provider asked to wait longer than a
  -- run waits (ENRICHMENT_RETRY_AFTER_MAX_MS). Null: due now.
  add column metadata_enrichment_run_after timestamptz;
