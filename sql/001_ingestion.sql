-- The ingestion queue (ADR-022, queue 1) and what it produces: editions and their chapters.
-- Statuses: Queued → Processing → Completed | Failed. See docs/queues/ingestion.md for the transitions.

create table editions (
  id bigint generated always as identity primary key,
  title text not null,
  author text,
  format text not null,
  -- The chapter assets on disk live under editions/<id>/v<asset_version>/; bumped by every ingest
  -- so the previous version can be deleted once the new one is written.
  asset_version integer not null default 0,
  -- The version completely written to disk (after the commit that saved asset_version). They
  -- differ only while a write runs or after one was cut short; the consumer then rewrites it.
  assets_version integer not null default 0,
  -- After a failed rewrite (disk full, unwritable directory) the next try waits until then.
  assets_repair_after timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create index editions_assets_behind on editions (id) where assets_version <> asset_version;

create table chapters (
  edition_id bigint not null references editions (id) on delete cascade,
  position integer not null,
  title text not null,
  html text not null,
  primary key (edition_id, position)
);

create table ingestion_jobs (
  id bigint generated always as identity primary key,
  source_path text not null,
  -- Set by the API to re-ingest an existing edition; set by the run for a new one.
  edition_id bigint references editions (id),
  status text not null default 'Queued'
    check (status in ('Queued', 'Processing', 'Completed', 'Failed')),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  error text,
  -- The per-boot id of the process whose claim is live; every settling write is fenced on it.
  claimed_by uuid,
  claimed_at timestamptz,
  -- A transient failure puts the job back with a delay; the claim skips it until then.
  run_after timestamptz not null default now(),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz
);

-- The claim scans only claimable rows, oldest first.
create index ingestion_jobs_claimable on ingestion_jobs (id)
  where status in ('Queued', 'Processing');

-- NOTIFY is a hint, never data: the channel is "<schema>.<table>" and the payload is empty.
-- Statement-level, so a 500-row insert sends one notification, not 500.
create function notify_queue() returns trigger
language plpgsql as $$
begin
  if exists (select 1 from new_rows where status = 'Queued') then
    perform pg_notify(tg_table_schema || '.' || tg_table_name, '');
  end if;
  return null;
end
$$;

create trigger ingestion_jobs_notify_insert
  after insert on ingestion_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();

-- Covers every way a row becomes Queued again: give back, transient retry, admin retry.
create trigger ingestion_jobs_notify_update
  after update on ingestion_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();
