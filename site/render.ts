/**
 * Render every published edition into one directory (a build; site/builds.ts makes it live).
 * Pages are laid out as site/pages.tsx says; an edition's chapter assets (images and other files
 * beside the chapters in `STORAGE_DIR/editions/<id>/v<version>/`) are copied next to its chapter
 * pages, so a relative `src` in chapter HTML resolves as it did beside the chapter file.
 *
 * Every relative `src` and `href` in chapter HTML is checked against the files of its edition in
 * this build: one that would not resolve (an EPUB's cross-file link, an image that was never
 * extracted) is dropped — the `img` removed, the `a` unwrapped to its text — so the built site
 * has no broken internal link.
 *
 * @module
 */
import { join } from "node:path";
import { DomUtils, parseDocument } from "htmlparser2";
import { type Element, isTag, type Node } from "domhandler";
import render from "dom-serializer";
import {
  chapterPage,
  type ChapterPageData,
  chapterPath,
  editionPage,
  editionPath,
  type EditionSummary,
  indexPage,
  robots,
  sitemap,
  STYLESHEET,
  STYLESHEET_PATH,
} from "./pages.tsx";

/** An edition's content for its pages. */
export interface EditionContent {
  /** The asset version whose folder holds the edition's images (`v<version>`). */
  readonly assetVersion: number;
  /**
   * The version completely written to disk (`editions.assets_version`); when it is not
   * `assetVersion` the edition's assets are missing and the render refuses the build. Absent:
   * taken as written.
   */
  readonly writtenVersion?: number;
  /** In reading order. */
  readonly chapters: readonly ChapterPageData[];
}

/** Where the render reads published editions from (queues/ssg/mod.ts answers from Postgres). */
export interface SiteSource {
  /** Published editions, in index order. */
  list(signal: AbortSignal): Promise<EditionSummary[]>;
  /** One edition's content; null when it is no longer published (it is then left out). */
  load(id: string, signal: AbortSignal): Promise<EditionContent | null>;
}

/** Options for {@linkcode renderSite}. */
export interface RenderOptions {
  /** An empty directory to render into. */
  readonly dir: string;
  /** Absolute base URL ending in `/`, for `sitemap.xml` and `robots.txt`. */
  readonly siteUrl: string;
  /** Root of the chapter assets (`editions/<id>/v<version>/`). */
  readonly storageDir: string;
  readonly source: SiteSource;
  /** Checked before every file written: an abort stops the render with its reason. */
  readonly signal: AbortSignal;
  /** Called after each file is written, with its path relative to `dir` (progress). */
  readonly onFile?: (path: string) => void;
}

/** What a render produced. */
export interface RenderSummary {
  editions: number;
  /** HTML pages written (index, edition and chapter pages). */
  pages: number;
  /** Asset files copied. */
  assets: number;
  /** References in chapter HTML dropped because they would not resolve. */
  droppedRefs: number;
}

/**
 * Editions whose assets are not (yet) written: a build without them would go live with their
 * images dropped, so the render refuses it. `editions` names each one.
 */
export class MissingAssetsError extends Error {
  override name = "MissingAssetsError";
  constructor(
    readonly editions: ReadonlyArray<{ id: string; assetVersion: number; written: number }>,
  ) {
    super(
      `the assets of ${editions.length === 1 ? "edition" : "editions"} ${
        editions.map((e) => `${e.id} (v${e.assetVersion} saved, v${e.written} written)`).join(", ")
      } are not written yet`,
    );
  }
}

// The chapter files of an asset version: `<position>.html` at its top level (books/assets.ts).
const CHAPTER_FILE = /^\d+\.html$/;

/**
 * Render the site into `options.dir`.
 *
 * @returns counts of what was written.
 * @throws `signal.reason` when aborted (the caller removes the partial directory);
 *   {@linkcode MissingAssetsError} naming every published edition whose assets are not written
 *   (after reading them all, before the index is written); a database or file-system error.
 */
export async function renderSite(options: RenderOptions): Promise<RenderSummary> {
  const { dir, signal } = options;
  const write = async (path: string, text: string) => {
    signal.throwIfAborted();
    await Deno.mkdir(join(dir, path, ".."), { recursive: true });
    await Deno.writeTextFile(join(dir, path), text);
    options.onFile?.(path);
  };
  const summary: RenderSummary = { editions: 0, pages: 0, assets: 0, droppedRefs: 0 };
  const rendered: EditionSummary[] = [];
  const urls: string[] = [];
  const missing: { id: string; assetVersion: number; written: number }[] = [];
  for (const edition of await options.source.list(signal)) {
    const content = await options.source.load(edition.id, signal);
    if (!content) continue;
    if (content.writtenVersion !== undefined && content.writtenVersion !== content.assetVersion) {
      missing.push({
        id: edition.id,
        assetVersion: content.assetVersion,
        written: content.writtenVersion,
      });
      continue;
    }
    if (missing.length > 0) continue;
    const assets = await copyAssets(options, edition.id, content.assetVersion);
    summary.assets += assets.length;
    const own = new Set([
      editionPath(edition.id),
      ...content.chapters.map((c) => chapterPath(edition.id, c.position)),
      ...assets,
    ]);
    await write(editionPath(edition.id), await editionPage(edition, content.chapters));
    urls.push(editionPath(edition.id));
    const chapters = content.chapters;
    for (const [i, chapter] of chapters.entries()) {
      const path = chapterPath(edition.id, chapter.position);
      const checked = keepResolvableRefs(chapter.html, path, own);
      summary.droppedRefs += checked.dropped;
      await write(
        path,
        await chapterPage(
          edition,
          { ...chapter, html: checked.html },
          chapters[i - 1] ?? null,
          chapters[i + 1] ?? null,
        ),
      );
      urls.push(path);
    }
    summary.pages += 1 + chapters.length;
    summary.editions++;
    rendered.push(edition);
  }
  if (missing.length > 0) throw new MissingAssetsError(missing);
  // Last, so they list exactly the editions rendered above.
  await write("index.html", await indexPage(rendered));
  summary.pages++;
  await write(STYLESHEET_PATH, STYLESHEET);
  const absolute = ["", ...urls.map((path) => path.replace(/(^|\/)index\.html$/, "$1"))]
    .map((path) => new URL(path, options.siteUrl).href);
  await write("sitemap.xml", await sitemap(absolute));
  await write("robots.txt", robots(options.siteUrl));
  return summary;
}

/**
 * Copy an edition's non-chapter asset files into `editions/<id>/` of the build. Only regular files
 * and directories are followed: a symlink could point outside `STORAGE_DIR` and publish a private
 * file, and a FIFO could block the render. A file is published only as what its bytes are
 * (books/resource_types.ts): an image, audio, video or WebVTT file under the extension of its real
 * type, an SVG sanitised again; anything else (HTML, script, a file renamed to another type's
 * extension) is left out, and the chapters' references to it are dropped like any that do not
 * resolve. Assets stored before ingestion vetted them are held to the same rule.
 *
 * @returns the copied files' paths relative to the build root.
 */
async function copyAssets(options: RenderOptions, id: string, version: number): Promise<string[]> {
  const from = join(options.storageDir, "editions", id, `v${version}`);
  const copied: string[] = [];
  // Loaded on first use: a worker that never renders never holds the type sniffer.
  const { vetResource } = await import("../books/resource_types.ts");
  const walk = async (rel: string): Promise<void> => {
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(join(from, rel)));
    } catch (err) {
      // An edition without an asset folder has no images to copy.
      if (rel === "" && err instanceof Deno.errors.NotFound) return;
      throw err;
    }
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory) {
        await walk(path);
        continue;
      }
      if (!entry.isFile) continue;
      // The chapters are pages of their own; an `index.html` would overwrite the edition page.
      if (rel === "" && (CHAPTER_FILE.test(entry.name) || entry.name === "index.html")) continue;
      options.signal.throwIfAborted();
      const vetted = await vetResource(await Deno.readFile(join(from, path)));
      if (vetted === null || !hasExtension(entry.name, vetted.extension)) continue;
      const target = `editions/${id}/${path}`;
      await Deno.mkdir(join(options.dir, target, ".."), { recursive: true });
      await Deno.writeFile(join(options.dir, target), vetted.bytes);
      options.onFile?.(target);
      copied.push(target);
    }
  };
  await walk("");
  return copied;
}

/** Whether a file name ends in `.<extension>` (`.jpeg` counts as `jpg`), case-insensitively. */
function hasExtension(name: string, extension: string): boolean {
  const own = name.slice(name.lastIndexOf(".") + 1).toLowerCase();
  return own === extension || (own === "jpeg" && extension === "jpg");
}

// Resolve references against a fake origin: anything that stays on it is a path in the build.
const ORIGIN = "http://site.invalid/";

/**
 * Drop the references of a chapter's HTML that would not resolve to a file of its edition.
 *
 * @param html sanitised chapter HTML.
 * @param page the chapter page's path relative to the build root.
 * @param files the paths (relative to the build root) the reference may point to.
 * @returns the HTML (unchanged when nothing was dropped) and how many references were dropped.
 */
export function keepResolvableRefs(
  html: string,
  page: string,
  files: ReadonlySet<string>,
): { html: string; dropped: number } {
  const doc = parseDocument(html);
  const broken: Element[] = [];
  const visit = (nodes: Node[]) => {
    for (const node of nodes) {
      if (!isTag(node)) continue;
      const ref = node.attribs.src ?? node.attribs.href;
      if (ref !== undefined && !resolves(ref, page, files)) broken.push(node);
      visit(node.children);
    }
  };
  visit(doc.children);
  if (broken.length === 0) return { html, dropped: 0 };
  for (const node of broken) {
    if (node.name === "a") {
      // Keep the link's text: unwrap it.
      const parent = node.parent;
      if (parent) {
        const at = parent.children.indexOf(node);
        for (const child of node.children) child.parent = parent;
        parent.children.splice(at, 1, ...node.children);
      }
    } else {
      DomUtils.removeElement(node);
    }
  }
  return { html: render(doc), dropped: broken.length };
}

function resolves(ref: string, page: string, files: ReadonlySet<string>): boolean {
  let url: URL;
  try {
    url = new URL(ref, ORIGIN + page);
  } catch {
    return false;
  }
  // Another site (http, https, mailto): not ours to check.
  if (url.origin !== new URL(ORIGIN).origin) return true;
  let path: string;
  try {
    path = decodeURIComponent(url.pathname).slice(1);
  } catch {
    return false;
  }
  return path === page || files.has(path);
}
