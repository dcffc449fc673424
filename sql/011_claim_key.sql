-- The claim key of the host-polled queues (docs/claim-keys.md): a uuid the poller chose before
-- sending a claim, stored on every job that claim took. A repeat of the key returns those jobs
-- (still Running, same claim_token) instead of claiming new ones; a key no job carries claims.
-- Written by the poller's claims only: the SEO crew path's jobs never carry one.
alter table auto_publish_jobs add column claim_key uuid;
alter table seo_backfill_jobs add column claim_key uuid;

create index auto_publish_jobs_claim_key on auto_publish_jobs (claim_key)
  where claim_key is not null;
create index seo_backfill_jobs_claim_key on seo_backfill_jobs (claim_key)
  where claim_key is not null;
