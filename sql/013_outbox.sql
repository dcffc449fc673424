-- The outbox (lib/outbox.ts): post-commit effects recorded in the transaction of the state change
-- they follow, and delivered after the commit by one hosted drain under its own advisory lock.
-- Plumbing, not a queue: no status names, no admin retry, not in the dashboard's queue list.

create table outbox (
  id bigint generated always as identity primary key,
  -- What to do: the drain's handler of this name delivers the payload (e.g. 'indexnow').
  kind text not null check (kind ~ '^[a-z][a-z0-9_-]{0,39}$'),
  -- One effect per key within a kind: a second record with the same key is the same effect
  -- (an IndexNow ping per edition and asset version: 'edition-<id>-v<version>').
  dedup_key text not null,
  payload jsonb not null,
  -- Delivery tries so far, the last one's error, and when the next may run (backoff).
  attempt_count integer not null default 0 check (attempt_count >= 0),
  last_error text,
  next_attempt_at timestamptz not null default now(),
  -- Null until a delivery succeeded; delivered rows are kept: they are the de-duplication.
  delivered_at timestamptz,
  created_at timestamptz not null default now(),
  unique (kind, dedup_key)
);

create index outbox_undelivered on outbox (next_attempt_at) where delivered_at is null;

-- Channel "<schema>.outbox": a committed record wakes the drain (a hint; it also polls).
create or replace function outbox_notify() returns trigger
language plpgsql as $$
begin
  perform pg_notify(tg_table_schema || '.outbox', '');
  return null;
end
$$;

create trigger outbox_notify_insert
  after insert on outbox
  for each statement execute function outbox_notify();
