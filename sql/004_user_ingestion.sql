-- The user ingestion queue (ADR-022 row 2): a reader's own upload, read into a user book and its
-- chapters. Statuses: job Queued → Processing → Completed | Failed; user book Processing → Ready |
-- Failed. See docs/queues/user_ingestion.md for the transitions.

create table user_books (
  id bigint generated always as identity primary key,
  owner_id bigint not null check (owner_id > 0),
  -- Known once the file has been read; null while Processing.
  title text,
  author text,
  format text,
  status text not null default 'Processing' check (status in ('Processing', 'Ready', 'Failed')),
  -- The reader-facing message: never a stack trace, never blames the file for a crash.
  error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create index user_books_owner on user_books (owner_id);

-- A user book's chapters, stored like an edition's; assets under STORAGE_DIR/user-books/<id>/.
create table user_chapters (
  user_book_id bigint not null references user_books (id) on delete cascade,
  position integer not null,
  title text not null,
  html text not null,
  primary key (user_book_id, position)
);

create table user_ingestion_jobs (
  id bigint generated always as identity primary key,
  user_book_id bigint not null references user_books (id) on delete cascade,
  -- Relative to STORAGE_DIR (an upload lands under uploads/).
  source_path text not null,
  status text not null default 'Queued'
    check (status in ('Queued', 'Processing', 'Completed', 'Failed')),
  attempt_count integer not null default 0 check (attempt_count >= 0),
  -- The technical reason, for operators; the reader sees user_books.error.
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

create index user_ingestion_jobs_book on user_ingestion_jobs (user_book_id);
-- The claim scans only claimable rows, oldest first.
create index user_ingestion_jobs_claimable on user_ingestion_jobs (id)
  where status in ('Queued', 'Processing');

create trigger user_ingestion_jobs_notify_insert
  after insert on user_ingestion_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();

-- Covers every way a row becomes Queued again: give back, transient retry, admin retry, recovery.
create trigger user_ingestion_jobs_notify_update
  after update on user_ingestion_jobs
  referencing new table as new_rows
  for each statement execute function notify_queue();
