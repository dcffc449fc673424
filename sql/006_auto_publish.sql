-- The auto-publish queue (ADR-022 row 5), consumed by the host poller host/seo-publish-poll.sh
-- through the claim API (queues/auto_publish/routes.ts). Statuses: Queued → Running → Completed |
-- Failed; see docs/queues/auto_publish.md for the transitions.

create table auto_publish_jobs (
  id bigint generated always as identity primary key,
  edition_id bigint not null references editions (id) on delete cascade,
  -- Claim order is priority DESC, created_at (ADR-022 "Per queue": keep that order).
  priority integer not null default 0,
  status text not null default 'Queued'
    check (status in ('Queued', 'Running', 'Completed', 'Failed')),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  error text,
  -- Minted fresh by every claim and matched by every settling write (the fence). Kept after a
  -- complete, fail or give-back so a repeated request with the same token gets the same answer;
  -- cleared by recover and the admin retry, so a token from before them is refused.
  claim_token uuid,
  claimed_at timestamptz,
  -- What the poller reported on complete, plus what the complete did (published_at, ssg_job_id).
  result jsonb,
  finished_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- One Queued or Running job per edition: a second create is refused (409), also under a race.
create unique index auto_publish_jobs_one_in_flight on auto_publish_jobs (edition_id)
  where status in ('Queued', 'Running');
create index auto_publish_jobs_claimable on auto_publish_jobs (priority desc, created_at, id)
  where status = 'Queued';
-- The breaker counts an edition's Failed jobs of the last 24 h.
create index auto_publish_jobs_failures on auto_publish_jobs (edition_id, finished_at)
  where status = 'Failed';
