-- What every queue table shares. Each queue's own migration creates its table and its triggers.
--
-- notify_queue([runnable status [, status column]]): a statement-level trigger function that
-- sends one empty NOTIFY on the channel "<schema>.<table>" when the statement left at least one
-- row in the queue's runnable status (default 'Queued' in column "status"; enrichment passes
-- 'Pending' and its own column). NOTIFY is a hint, never data, and PostgreSQL delivers it on
-- commit only. Declare the trigger `referencing new table as new_rows … for each statement`.
-- (First created by 001_ingestion.sql for its own table; this is its home from now on.)
create or replace function notify_queue() returns trigger
language plpgsql as $$
declare
  runnable text := coalesce(tg_argv[0], 'Queued');
  col text := coalesce(tg_argv[1], 'status');
  wakes boolean;
begin
  if col = 'status' then
    wakes := exists (select 1 from new_rows where status = runnable);
  else
    execute format('select exists (select 1 from new_rows where %I = $1)', col)
      into wakes using runnable;
  end if;
  if wakes then
    perform pg_notify(tg_table_schema || '.' || tg_table_name, '');
  end if;
  return null;
end
$$;
