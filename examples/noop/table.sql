-- The example queue's table (examples/noop/mod.ts). A new queue's migration has the same parts: the
-- table with the ADR's statuses, the attempt count and the claim's boot id; a partial index for the
-- claim; the two NOTIFY triggers every queue has (sql/002_queue_common.sql for inserts,
-- sql/009_cost_per_job.sql for rows that become Queued). `enqueued_xid` lets the bench read the
-- inserting transaction's commit time (track_commit_timestamp) for the wake latency.
create table noop_jobs (
  id bigint generated always as identity primary key,
  status text not null default 'Queued'
    check (status in ('Queued', 'Processing', 'Completed', 'Failed')),
  attempt_count integer not null default 0,
  claimed_by uuid,
  claimed_at timestamptz,
  finished_at timestamptz,
  enqueued_xid xid8 not null default pg_current_xact_id(),
  created_at timestamptz not null default clock_timestamp()
);

create index noop_jobs_claimable on noop_jobs (id) where status in ('Queued', 'Processing');

create trigger noop_jobs_notify_insert
  after insert on noop_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();

create trigger noop_jobs_notify_update
  after update on noop_jobs
  for each row when (new.status = 'Queued')
  execute function notify_queue_row();
