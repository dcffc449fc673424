/**
 * Shared setup for the ssg tests: a context on a test schema with its own storage and site
 * directories, editions with chapters and asset files, and an independent check of a built site
 * (every internal `href`/`src` resolves to a file; the sitemap's URLs).
 *
 * @module
 */
import { join } from "node:path";
import { parseDocument } from "htmlparser2";
import { isTag, type Node } from "domhandler";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import type { SsgContext, SsgJobRow } from "../queues/ssg/mod.ts";
import type { TestDb } from "./_db.ts";

/** An ssg context bound to `db`, with fresh storage and site directories. */
export async function ssgContext(
  db: TestDb,
  options: { bootId?: string; onFile?: (path: string) => void } = {},
): Promise<SsgContext & { events: EventHub }> {
  const root = await Deno.makeTempDir({ prefix: "textstack-ssg-" });
  await Deno.mkdir(`${root}/storage`);
  return {
    sql: db.sql,
    log: createLogger(Deno.env.get("TEST_LOG_LEVEL") ?? "silent"),
    bootId: options.bootId ?? crypto.randomUUID(),
    events: new EventHub(),
    storageDir: `${root}/storage`,
    siteDir: `${root}/site`,
    siteUrl: "https://books.example/shelf/",
    onFile: options.onFile,
  };
}

/** A chapter to insert. */
export interface TestChapter {
  title: string;
  html: string;
}

/**
 * Insert an edition with its chapters (asset version 1) and, optionally, files in its asset
 * folder `editions/<id>/v1/` (the chapter files `<n>.html` are always written).
 *
 * @returns the edition id.
 */
export async function insertEdition(
  db: TestDb,
  storageDir: string,
  edition: {
    title: string;
    author?: string | null;
    chapters: TestChapter[];
    published?: boolean;
    assets?: Record<string, string | Uint8Array>;
  },
): Promise<string> {
  const [row] = await db.sql<{ id: string }[]>`
    insert into editions (title, author, format, asset_version, assets_version, published_at)
    values (${edition.title}, ${edition.author ?? null}, 'txt', 1, 1,
            ${edition.published === false ? null : db.sql`now()`})
    returning id`;
  const rows = edition.chapters.map((c, i) => ({
    edition_id: row.id,
    position: i + 1,
    title: c.title,
    html: c.html,
  }));
  if (rows.length > 0) await db.sql`insert into chapters ${db.sql(rows)}`;
  const dir = join(storageDir, "editions", row.id, "v1");
  await Deno.mkdir(dir, { recursive: true });
  for (const [i, c] of edition.chapters.entries()) {
    await Deno.writeTextFile(join(dir, `${i + 1}.html`), c.html);
  }
  for (const [path, content] of Object.entries(edition.assets ?? {})) {
    await Deno.mkdir(join(dir, path, ".."), { recursive: true });
    if (typeof content === "string") await Deno.writeTextFile(join(dir, path), content);
    else await Deno.writeFile(join(dir, path), content);
  }
  return row.id;
}

/** Read one job row. */
export async function ssgJob(db: TestDb, id: string): Promise<SsgJobRow> {
  const [row] = await db.sql<SsgJobRow[]>`select * from ssg_rebuild_jobs where id = ${id}`;
  return row;
}

/** Every file under `root` (following no symlinks), relative paths → contents. */
export async function snapshot(root: string): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  const walk = async (rel: string) => {
    for await (const entry of Deno.readDir(join(root, rel))) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory) await walk(path);
      else files.set(path, await Deno.readFile(join(root, path)));
    }
  };
  await walk("");
  return files;
}

/** A reference found in a built page. */
export interface PageRef {
  page: string;
  attr: "href" | "src";
  ref: string;
}

/**
 * Every `href` and `src` of every HTML page under `root`, and those that are internal (no scheme)
 * but do not resolve to a file. Independent of site/render.ts on purpose.
 */
export async function checkLinks(
  root: string,
): Promise<{ pages: string[]; refs: PageRef[]; broken: PageRef[] }> {
  const files = await snapshot(root);
  const pages = [...files.keys()].filter((p) => p.endsWith(".html")).sort();
  const refs: PageRef[] = [];
  for (const page of pages) {
    const doc = parseDocument(new TextDecoder().decode(files.get(page)));
    const visit = (nodes: Node[]) => {
      for (const node of nodes) {
        if (!isTag(node)) continue;
        for (const attr of ["href", "src"] as const) {
          const ref = node.attribs[attr];
          if (ref !== undefined) refs.push({ page, attr, ref });
        }
        visit(node.children);
      }
    };
    visit(doc.children);
  }
  const broken: PageRef[] = [];
  for (const r of refs) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(r.ref)) continue; // external: https:, mailto:
    const url = new URL(r.ref, `file:///site/${r.page}`);
    const path = decodeURIComponent(url.pathname).replace(/^\/site\//, "");
    const info = await Deno.stat(join(root, path)).catch(() => null);
    if (!url.pathname.startsWith("/site/") || !info?.isFile) broken.push(r);
  }
  return { pages, refs, broken };
}
