-- What a reader sees of an edition beyond its chapter text.

-- language: BCP 47 tag from the book (EPUB dc:language), null when it names none.
-- direction: page-progression direction ('ltr' | 'rtl'), null when the book gives no clue.
-- warnings: what was imperfect, [{"kind": "...", "message": "..."}] in the order found; kinds
-- no_headings, spine_item_skipped, resource_missing, encoding_guessed (books/book.ts).
alter table editions
  add column language text,
  add column direction text check (direction in ('ltr', 'rtl')),
  add column warnings jsonb not null default '[]'::jsonb check (jsonb_typeof(warnings) = 'array');

-- The files the chapters use (images, audio, SVG), written beside them as
-- editions/<id>/v<asset_version>/<path>. Kept here, not only on disk, because the chapter assets
-- on disk are derived from the database: when their post-commit write is cut short, the asset
-- repair rewrites the version from the database alone (the source file may since be replaced or
-- deleted, and re-extracting it would mean running the book's parse inside the repair). bytea is
-- stored out of line (TOAST), so reading chapters never touches it; a table of its own, keyed by
-- the written path, lets the repair stream one file at a time and a re-ingest replace them all.
create table resources (
  edition_id bigint not null references editions (id) on delete cascade,
  -- Relative to the version folder; never absolute, never `..`: the repair writes it as given.
  path text not null check (path ~ '^res/[A-Za-z0-9._-]+$' and path !~ '/\.'),
  media_type text not null,
  bytes bytea not null,
  primary key (edition_id, path)
);
