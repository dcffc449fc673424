-- An edition's licence or rights statement, kept as metadata beside its chapters and never inside
-- them: a Project Gutenberg frame's licence text (plain text, the frame's lines trimmed), or an
-- EPUB's dc:rights (books/book.ts ExtractedBook.licence). Null when the book states none. The
-- static site shows it on the edition page when present.
alter table editions add column licence text;
