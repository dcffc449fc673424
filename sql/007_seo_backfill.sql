-- The SEO backfill queue (ADR-022 row 6), consumed by the host poller host/seo-backfill-poll.sh
-- and the admin crew path through the claim API (queues/seo_backfill/routes.ts), and the
-- edition fields it writes. Statuses: Queued → Running → Completed | Failed; see
-- queues/seo_backfill/mod.ts for the transitions.

alter table editions
  add column meta_title text,
  add column meta_description text,
  add column meta_keywords text[];

create table seo_backfill_jobs (
  id bigint generated always as identity primary key,
  edition_id bigint not null references editions (id) on delete cascade,
  status text not null default 'Queued'
    check (status in ('Queued', 'Running', 'Completed', 'Failed')),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  error text,
  -- Minted fresh by every claim (and by the crew path's insert) and matched by every settling
  -- write. Kept after a complete, fail or give-back so a repeated request with the same token gets
  -- the same answer; cleared by the stale sweep and the admin retry.
  claim_token uuid,
  -- The stale sweep before each claim fails Running rows claimed more than SEO_STALE_AFTER_MS ago.
  claimed_at timestamptz,
  -- The SEO fields applied on complete.
  result jsonb,
  -- 'poller' (claimed from Queued) or 'crew' (inserted Running by the admin crew path).
  claimed_via text check (claimed_via in ('poller', 'crew')),
  finished_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create index seo_backfill_jobs_claimable on seo_backfill_jobs (created_at, id)
  where status = 'Queued';
create index seo_backfill_jobs_running on seo_backfill_jobs (claimed_at) where status = 'Running';

-- The BeforeSnapshot (ADR-022 "Two consumers are not safe": SEO apply): an edition's SEO fields as
-- they were before this path first changed them. One row per edition, taken once (insert … on
-- conflict do nothing), so a second run never snapshots the first run's output. Revert restores
-- the fields from it and deletes it.
create table seo_before_snapshots (
  edition_id bigint primary key references editions (id) on delete cascade,
  meta_title text,
  meta_description text,
  meta_keywords text[],
  taken_at timestamptz not null default now()
);
