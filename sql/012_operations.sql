-- Operating the queues: pause flags, the attempt history of every job, the cancelled mark the
-- auto-publish breaker skips, and indexes for the admin lists' status filter.

-- A paused queue has a row here (its name, as in logs and metrics); resume deletes it. Consumers
-- claim nothing of a paused queue: the in-process consumer checks its flag before each claim
-- (lib/control.ts), and the host-polled queues' claim statements read this table themselves.
create table queue_pauses (
  queue text primary key,
  paused_at timestamptz not null default now()
);

-- Every change to a pause is announced on "<schema>.queue_control" (lib/control.ts), so every
-- instance sees it at once; a cancel request of a running job uses the same channel.
create function notify_queue_control() returns trigger
language plpgsql as $$
begin
  perform pg_notify(tg_table_schema || '.queue_control',
    json_build_object('pause', coalesce(new.queue, old.queue))::text);
  return null;
end
$$;

create trigger queue_pauses_notify
  after insert or update or delete on queue_pauses
  for each row execute function notify_queue_control();

-- record_attempt(status column, attempt column, started column, error column, attempts column):
-- a BEFORE UPDATE row trigger, declared with a WHEN clause that is true only for a statement that
-- moves a row out of its running status (every settling write: complete, fail, retry later,
-- give back, cancel, recovery, stale sweep). It appends the attempt that ended to the row's
-- attempts list: { attempt, started_at, ended_at, outcome, error }, outcome one of completed,
-- failed, cancelled, given_back (the attempt was not counted), retry (back to runnable with the
-- attempt spent). The list keeps the last 20 attempts (River's `errors`, bounded). One trigger per
-- table covers every settling statement of the queue, so none of them can forget it; a WHEN
-- clause that is false costs nothing on the claims.
create function record_attempt() returns trigger
language plpgsql as $$
declare
  o jsonb := to_jsonb(old);
  n jsonb := to_jsonb(new);
  status text := n ->> tg_argv[0];
  err text := n ->> tg_argv[3];
  outcome text;
  list jsonb;
begin
  outcome := case
    when status = 'Completed' then 'completed'
    when status = 'Failed' and err = 'cancelled by admin' then 'cancelled'
    when status = 'Failed' then 'failed'
    when (n ->> tg_argv[1])::int < (o ->> tg_argv[1])::int then 'given_back'
    else 'retry' end;
  list := coalesce(o -> tg_argv[4], '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', (o ->> tg_argv[1])::int,
    'started_at', o -> tg_argv[2],
    'ended_at', to_jsonb(now()),
    'outcome', outcome,
    'error', err));
  if jsonb_array_length(list) > 20 then
    list := (select jsonb_agg(e order by i) from jsonb_array_elements(list) with ordinality t(e, i)
             where i > jsonb_array_length(list) - 20);
  end if;
  return jsonb_populate_record(new, jsonb_build_object(tg_argv[4], list));
end
$$;

alter table ingestion_jobs add column attempts jsonb not null default '[]'::jsonb;
create trigger ingestion_jobs_attempts
  before update on ingestion_jobs
  for each row when (old.status = 'Processing' and new.status <> 'Processing')
  execute function record_attempt('status', 'attempt_count', 'claimed_at', 'error', 'attempts');

alter table user_ingestion_jobs add column attempts jsonb not null default '[]'::jsonb;
create trigger user_ingestion_jobs_attempts
  before update on user_ingestion_jobs
  for each row when (old.status = 'Processing' and new.status <> 'Processing')
  execute function record_attempt('status', 'attempt_count', 'claimed_at', 'error', 'attempts');

alter table ssg_rebuild_jobs add column attempts jsonb not null default '[]'::jsonb;
create trigger ssg_rebuild_jobs_attempts
  before update on ssg_rebuild_jobs
  for each row when (old.status = 'Running' and new.status <> 'Running')
  execute function record_attempt('status', 'attempt_count', 'started_at', 'error', 'attempts');

alter table user_books
  add column metadata_enrichment_attempts jsonb not null default '[]'::jsonb;
create trigger user_books_enrichment_attempts
  before update on user_books
  for each row when (old.metadata_enrichment_status = 'Running'
                     and new.metadata_enrichment_status is distinct from 'Running')
  execute function record_attempt('metadata_enrichment_status',
    'metadata_enrichment_attempt_count', 'metadata_enrichment_started_at',
    'metadata_enrichment_error', 'metadata_enrichment_attempts');

alter table auto_publish_jobs add column attempts jsonb not null default '[]'::jsonb;
create trigger auto_publish_jobs_attempts
  before update on auto_publish_jobs
  for each row when (old.status = 'Running' and new.status <> 'Running')
  execute function record_attempt('status', 'attempt_count', 'claimed_at', 'error', 'attempts');

alter table seo_backfill_jobs add column attempts jsonb not null default '[]'::jsonb;
create trigger seo_backfill_jobs_attempts
  before update on seo_backfill_jobs
  for each row when (old.status = 'Running' and new.status <> 'Running')
  execute function record_attempt('status', 'attempt_count', 'claimed_at', 'error', 'attempts');

-- An admin cancel of an auto-publish job is not a failure of its edition: the breaker (5 Failed
-- jobs in 24 h, ADR-022 row 5) counts only Failed jobs without this mark. Cleared by the retry.
alter table auto_publish_jobs add column cancelled_at timestamptz;
drop index auto_publish_jobs_failures;
create index auto_publish_jobs_failures on auto_publish_jobs (edition_id, finished_at)
  where status = 'Failed' and cancelled_at is null;

-- The admin lists filter by status, newest first: Queued and Processing/Running rows are in each
-- queue's claimable index, Completed rows are most of the table (the primary key finds them at
-- once), and these keep a Failed filter from walking every finished row.
create index ingestion_jobs_failed on ingestion_jobs (id) where status = 'Failed';
create index user_ingestion_jobs_failed on user_ingestion_jobs (id) where status = 'Failed';
create index ssg_rebuild_jobs_failed on ssg_rebuild_jobs (id) where status = 'Failed';
create index user_books_enrichment_failed on user_books (id)
  where metadata_enrichment_status = 'Failed';
create index auto_publish_jobs_failed on auto_publish_jobs (id) where status = 'Failed';
create index seo_backfill_jobs_failed on seo_backfill_jobs (id) where status = 'Failed';
