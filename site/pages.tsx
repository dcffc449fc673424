// deno-lint-ignore-file jsx-key -- rendered once on the server; no client reconciles these lists
/**
 * The static site's pages, rendered to strings with Hono's JSX: the index, one page per edition,
 * one per chapter, their stylesheet, and the `sitemap.xml` / `robots.txt` texts. Every value is
 * escaped by the renderer except the chapter body, which ingestion already sanitised
 * (books/sanitize.ts). Links between pages are relative, so the site works from any base URL.
 *
 * Layout (paths relative to the build root; permanent, never renamed):
 * - `index.html` — every published edition;
 * - `editions/<id>/index.html` — title, author, table of contents;
 * - `editions/<id>/<position>.html` — one chapter, with previous/next links;
 * - `site.css` — the reading stylesheet ({@linkcode STYLESHEET});
 * - `sitemap.xml`, `robots.txt`.
 *
 * Every page carries `<html lang dir>` (the edition's language and direction; the index is in
 * English), a viewport, the edition's SEO description where the seo_backfill queue stored one
 * (`editions.meta_description`), and a Content-Security-Policy that allows no script at all
 * ({@linkcode CONTENT_SECURITY_POLICY}): nothing on the site needs JavaScript to be read, and a
 * script that slipped into a book could not run.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import { html, raw } from "hono/html";
import { languageDirection, type TextDirection } from "../books/book.ts";

/** An edition as the index lists it and its pages are headed. */
export interface EditionSummary {
  /** bigint id, as a string. */
  readonly id: string;
  readonly title: string;
  readonly author: string | null;
  /** BCP 47 tag, or null when the book names none. */
  readonly language?: string | null;
  /** Page-progression direction, or null when the book gives no clue. */
  readonly direction?: TextDirection | null;
  /** The SEO description (`editions.meta_description`), or null when none was computed. */
  readonly description?: string | null;
  /** The book's licence or rights statement (`editions.licence`, plain text), or null. */
  readonly licence?: string | null;
}

/** A chapter as its page shows it. */
export interface ChapterPageData {
  /** 1-based reading order; also its file name (`<position>.html`). */
  readonly position: number;
  /** Plain text (escaped here). */
  readonly title: string;
  /** Sanitised chapter HTML, inserted as is. */
  readonly html: string;
}

/** The stylesheet's path, relative to the build root. */
export const STYLESHEET_PATH = "site.css";

/**
 * The policy every page sends in a `<meta http-equiv>`: no script from anywhere, no plugins, no
 * frames, no forms; styles only from the site's stylesheet; images and media from the site or
 * over HTTPS (a book may show a picture from the web).
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'none'",
  "object-src 'none'",
  "style-src 'self'",
  "img-src 'self' https:",
  "media-src 'self' https:",
  "base-uri 'none'",
  "form-action 'none'",
].join("; ");

/**
 * The reading stylesheet: a measure of about 60 characters, a system serif at a comfortable size
 * and line height, logical properties (so right-to-left pages mirror), a phone layout, dark mode
 * through `prefers-color-scheme`, print styles, and media scaled to the column.
 */
export const STYLESHEET = `:root {
  color-scheme: light dark;
  --bg: #fbfaf6;
  --fg: #1d1c1a;
  --muted: #5b5750;
  --link: #1f4e8c;
  --visited: #5a3f8a;
  --rule: #d8d2c4;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #171614;
    --fg: #e4e0d6;
    --muted: #a8a398;
    --link: #8db4f0;
    --visited: #c1a6ec;
    --rule: #3b3833;
  }
}
*, *::before, *::after { box-sizing: border-box; }
html {
  background: var(--bg);
  color: var(--fg);
  -webkit-text-size-adjust: 100%;
  text-size-adjust: 100%;
}
body {
  margin: 0;
  font-family: Charter, "Bitstream Charter", "Sitka Text", Cambria, Georgia, "Noto Serif",
    "DejaVu Serif", "Liberation Serif", serif;
  font-size: 1.2rem;
  line-height: 1.6;
  overflow-wrap: break-word;
  hyphens: auto;
}
.site, main {
  max-width: 60ch;
  margin-inline: auto;
  padding-inline: 1.25rem;
}
.site {
  display: flex;
  flex-wrap: wrap;
  gap: 0.25rem 1rem;
  justify-content: space-between;
  padding-block: 1rem;
  border-block-end: 1px solid var(--rule);
}
.site a { font-size: 0.9rem; }
main { padding-block: 1.5rem 3rem; }
a { color: var(--link); text-underline-offset: 0.15em; }
a:visited { color: var(--visited); }
.site a { color: inherit; text-decoration: none; font-weight: 600; }
.site a:hover, .site a:focus-visible { text-decoration: underline; }
h1, h2, h3, h4, h5, h6 { line-height: 1.25; text-wrap: balance; margin-block: 1.6em 0.6em; }
h1 { font-size: 1.9rem; margin-block-start: 0.5em; }
h2 { font-size: 1.4rem; }
h3 { font-size: 1.2rem; }
p { margin-block: 0 1em; }
.author { font-size: 1.15rem; color: var(--muted); font-style: italic; margin-block-end: 1.5em; }
.description { color: var(--muted); }
.toc ol { padding-inline-start: 1.6em; }
.toc li { margin-block: 0.35em; }
.licence { margin-block-start: 2.5rem; font-size: 0.85rem; color: var(--muted); }
.licence summary { cursor: pointer; font-weight: 600; }
.licence p { white-space: pre-line; }
.books { list-style: none; padding: 0; }
.books li { margin-block: 0.8em; }
.books .by { color: var(--muted); }
blockquote {
  margin-inline: 0;
  padding-inline-start: 1.2em;
  border-inline-start: 3px solid var(--rule);
  color: var(--muted);
}
hr { border: 0; border-block-start: 1px solid var(--rule); margin-block: 2em; }
img, svg, video, canvas, picture, iframe { max-width: 100%; height: auto; }
img, video { max-height: 85vh; object-fit: contain; }
figure { margin-inline: 0; }
figcaption { font-size: 0.9rem; color: var(--muted); }
pre, code { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 0.85em; }
pre { overflow-x: auto; white-space: pre-wrap; }
table { display: block; max-width: 100%; overflow-x: auto; border-collapse: collapse; }
td, th { padding: 0.25em 0.5em; border: 1px solid var(--rule); }
math { overflow-x: auto; max-width: 100%; }
.pager {
  display: flex;
  flex-wrap: wrap;
  justify-content: space-between;
  gap: 0.5rem 1rem;
  margin-block: 1.5rem;
  padding-block: 0.75rem;
  border-block: 1px solid var(--rule);
  font-size: 0.95rem;
}
.pager a { text-decoration: none; }
.pager a:hover, .pager a:focus-visible { text-decoration: underline; }
.pager .next { margin-inline-start: auto; text-align: end; }
@media (max-width: 30rem) {
  body { font-size: 1.075rem; }
  h1 { font-size: 1.6rem; }
  .site, main { padding-inline: 1rem; }
}
@media print {
  :root { color-scheme: light; --bg: #fff; --fg: #000; --muted: #333; --link: #000; --rule: #999; }
  body { font-size: 11pt; line-height: 1.45; }
  .site, .pager { display: none; }
  main { max-width: none; padding: 0; }
  a { color: inherit; text-decoration: none; }
  h1, h2, h3 { break-after: avoid; }
  p { orphans: 3; widows: 3; }
  img, figure { break-inside: avoid; }
}
`;

/** The path of an edition's page, relative to the build root. */
export function editionPath(id: string): string {
  return `editions/${id}/index.html`;
}

/** The path of a chapter's page, relative to the build root. */
export function chapterPath(id: string, position: number): string {
  return `editions/${id}/${position}.html`;
}

/** `lang` and `dir` for an edition's pages: its own, else undetermined (`und`) and `ltr`. */
function languageOf(edition: EditionSummary): { lang: string; dir: TextDirection } {
  const lang = edition.language?.trim() || "und";
  const dir = edition.direction ?? (edition.language ? languageDirection(lang) : "ltr");
  return { lang, dir };
}

function Layout(
  props: {
    title: string;
    /** The build root, relative to the page: `""` or `"../../"`. */
    root: string;
    lang: string;
    dir: TextDirection;
    description?: string | null;
    /** Shown beside the site's name in the header: the edition's page link. */
    edition?: { title: string; href: string; lang: string } | null;
    children: Child;
  },
) {
  return (
    <html lang={props.lang} dir={props.dir}>
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta http-equiv="Content-Security-Policy" content={CONTENT_SECURITY_POLICY} />
        <meta name="referrer" content="no-referrer" />
        <title>{props.title}</title>
        {props.description ? <meta name="description" content={props.description} /> : null}
        <link rel="stylesheet" href={`${props.root}${STYLESHEET_PATH}`} />
      </head>
      <body>
        <header class="site">
          <a href={`${props.root}index.html`} lang="en" dir="ltr">TextStack</a>
          {props.edition
            ? <a href={props.edition.href} lang={props.edition.lang}>{props.edition.title}</a>
            : null}
        </header>
        <main>{props.children}</main>
      </body>
    </html>
  );
}

async function document(page: ReturnType<typeof Layout>): Promise<string> {
  return `<!DOCTYPE html>${await page}`;
}

/** The index page: every published edition, linking to its page. */
export async function indexPage(editions: readonly EditionSummary[]): Promise<string> {
  return await document(
    <Layout title="TextStack" root="" lang="en" dir="ltr">
      <h1>Books</h1>
      {editions.length === 0 ? <p>No books are published yet.</p> : (
        <ul class="books">
          {editions.map((e) => {
            const { lang, dir } = languageOf(e);
            return (
              <li>
                <a href={editionPath(e.id)} lang={lang} dir={dir}>{e.title}</a>
                {e.author ? <span class="by">— {e.author}</span> : null}
              </li>
            );
          })}
        </ul>
      )}
    </Layout>,
  );
}

/**
 * An edition's page (`editions/<id>/index.html`): title, author, its description, table of
 * contents, and the book's licence as a note (folded) when it states one.
 */
export async function editionPage(
  edition: EditionSummary,
  chapters: readonly Pick<ChapterPageData, "position" | "title">[],
): Promise<string> {
  const { lang, dir } = languageOf(edition);
  return await document(
    <Layout
      title={edition.title}
      root="../../"
      lang={lang}
      dir={dir}
      description={edition.description}
    >
      <h1>{edition.title}</h1>
      {edition.author ? <p class="author">{edition.author}</p> : null}
      {edition.description ? <p class="description">{edition.description}</p> : null}
      <nav class="toc" aria-labelledby="contents">
        <h2 id="contents">Contents</h2>
        <ol>
          {chapters.map((c) => (
            <li>
              <a href={`${c.position}.html`}>{c.title}</a>
            </li>
          ))}
        </ol>
      </nav>
      {edition.licence
        ? (
          <details class="licence">
            <summary>Licence</summary>
            {edition.licence.split(/\n\s*\n/).map((paragraph) => <p>{paragraph.trim()}</p>)}
          </details>
        )
        : null}
    </Layout>,
  );
}

/**
 * A chapter's page (`editions/<id>/<position>.html`), beside its edition's page.
 *
 * @param previous the chapter before it, or null for the first.
 * @param next the chapter after it, or null for the last.
 */
export async function chapterPage(
  edition: EditionSummary,
  chapter: ChapterPageData,
  previous: Pick<ChapterPageData, "position" | "title"> | null,
  next: Pick<ChapterPageData, "position" | "title"> | null,
): Promise<string> {
  const { lang, dir } = languageOf(edition);
  // Two landmarks of one kind need names of their own.
  const pager = (where: string) => (
    <nav class="pager" aria-label={`Chapters (${where})`}>
      {previous
        ? (
          <a class="prev" rel="prev" href={`${previous.position}.html`}>
            {dir === "rtl" ? "→" : "←"} {previous.title}
          </a>
        )
        : <a class="prev" href="index.html">{dir === "rtl" ? "→" : "←"} Contents</a>}
      {next
        ? (
          <a class="next" rel="next" href={`${next.position}.html`}>
            {next.title} {dir === "rtl" ? "←" : "→"}
          </a>
        )
        : <a class="next" href="index.html">Contents {dir === "rtl" ? "←" : "→"}</a>}
    </nav>
  );
  return await document(
    <Layout
      title={`${chapter.title} — ${edition.title}`}
      root="../../"
      lang={lang}
      dir={dir}
      description={edition.description}
      edition={{ title: edition.title, href: "index.html", lang }}
    >
      {pager("top")}
      <article>
        <h1>{chapter.title}</h1>
        {raw(chapter.html)}
      </article>
      {pager("bottom")}
    </Layout>,
  );
}

/**
 * `sitemap.xml` (sitemaps.org 0.9) listing absolute URLs.
 *
 * @param urls absolute URLs; escaped here.
 */
export async function sitemap(urls: readonly string[]): Promise<string> {
  // One line per URL; hono's `html` escapes each interpolated value.
  const entries = await Promise.all(urls.map((url) =>
    html`
      <url>
        <loc>${url}</loc>
      </url>
    `
  ));
  return `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n${
      entries.map((entry) => String(entry).replace(/\s*\n\s*/g, "")).join("\n")
    }\n</urlset>\n`;
}

/** `robots.txt`: everything may be crawled; the sitemap's absolute URL. */
export function robots(siteUrl: string): string {
  return `User-agent: *\nAllow: /\n\nSitemap: ${new URL("sitemap.xml", siteUrl)}\n`;
}
