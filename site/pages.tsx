/**
 * The static site's pages, rendered to strings with Hono's JSX (issue 7): the index, one page per
 * edition, one per chapter, and the `sitemap.xml` / `robots.txt` texts. Every value is escaped by
 * the renderer except the chapter body, which ingestion already sanitised (books/sanitize.ts).
 * Links between pages are relative, so the site works from any base URL and from `file://`.
 *
 * Layout (paths relative to the build root):
 * - `index.html` — every published edition;
 * - `editions/<id>/index.html` — title, author, table of contents;
 * - `editions/<id>/<position>.html` — one chapter, with previous/next links;
 * - `sitemap.xml`, `robots.txt`.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import { html, raw } from "hono/html";

/** An edition as the index lists it. */
export interface EditionSummary {
  /** bigint id, as a string. */
  readonly id: string;
  readonly title: string;
  readonly author: string | null;
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

/** The path of an edition's page, relative to the build root. */
export function editionPath(id: string): string {
  return `editions/${id}/index.html`;
}

/** The path of a chapter's page, relative to the build root. */
export function chapterPath(id: string, position: number): string {
  return `editions/${id}/${position}.html`;
}

function Layout(props: { title: string; home: string; children: Child }) {
  return (
    <html>
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{props.title}</title>
      </head>
      <body>
        <header>
          <a href={props.home}>TextStack</a>
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
    <Layout title="TextStack" home="index.html">
      <h1>Books</h1>
      {editions.length === 0 ? <p>No books are published yet.</p> : (
        <ul>
          {editions.map((e) => (
            <li>
              <a href={editionPath(e.id)}>{e.title}</a>
              {e.author ? <span>— {e.author}</span> : null}
            </li>
          ))}
        </ul>
      )}
    </Layout>,
  );
}

/** An edition's page (`editions/<id>/index.html`): title, author, table of contents. */
export async function editionPage(
  edition: EditionSummary,
  chapters: readonly Pick<ChapterPageData, "position" | "title">[],
): Promise<string> {
  return await document(
    <Layout title={edition.title} home="../../index.html">
      <h1>{edition.title}</h1>
      {edition.author ? <p class="author">{edition.author}</p> : null}
      <h2>Contents</h2>
      <ol>
        {chapters.map((c) => (
          <li>
            <a href={`${c.position}.html`}>{c.title}</a>
          </li>
        ))}
      </ol>
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
  const nav = (
    <nav>
      {previous
        ? (
          <>
            <a rel="prev" href={`${previous.position}.html`}>← {previous.title}</a>
            {" | "}
          </>
        )
        : null}
      <a href="index.html">{edition.title}</a>
      {next
        ? (
          <>
            {" | "}
            <a rel="next" href={`${next.position}.html`}>{next.title} →</a>
          </>
        )
        : null}
    </nav>
  );
  return await document(
    <Layout title={`${chapter.title} — ${edition.title}`} home="../../index.html">
      {nav}
      <article>
        <h1>{chapter.title}</h1>
        {raw(chapter.html)}
      </article>
      {nav}
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
