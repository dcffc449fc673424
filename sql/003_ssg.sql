-- The static-site rebuild queue (ADR-022 row 4, as shipped 2026-10-08) and what it renders:
-- published editions. Statuses: Queued → Running → Completed | Failed; see docs/queues/ssg.md.

-- Set by the admin publish route (and, later, by auto-publish's complete); null = not published.
alter table editions add column published_at timestamptz;
create index editions_published on editions (published_at) where published_at is not null;

create table ssg_rebuild_jobs (
  id bigint generated always as identity primary key,
  -- Only Full rebuilds remain (ADR-023 removed per-edit Specific jobs).
  kind text not null default 'Full' check (kind = 'Full'),
  status text not null default 'Queued'
    check (status in ('Queued', 'Running', 'Completed', 'Failed')),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  error text,
  -- The per-boot id of the process whose claim is live; every settling write is fenced on it.
  claimed_by uuid,
  started_at timestamptz,
  finished_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- At most one Queued Full job: a publish during a Running rebuild queues one follow-up, or reuses
-- the one already queued.
create unique index ssg_rebuild_jobs_one_queued on ssg_rebuild_jobs (kind) where status = 'Queued';
create index ssg_rebuild_jobs_in_flight on ssg_rebuild_jobs (created_at)
  where status in ('Queued', 'Running');

create trigger ssg_rebuild_jobs_notify_insert
  after insert on ssg_rebuild_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();

create trigger ssg_rebuild_jobs_notify_update
  after update on ssg_rebuild_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();
