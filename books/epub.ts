/**
 * EPUB books: the ZIP archive (`epub_archive.ts`), `META-INF/container.xml` → the OPF package
 * document → its metadata, manifest and spine, and one chapter per spine item in spine order (a
 * document the navigation divides at chapter headings split into them, `epub_split.ts`),
 * titled from the book's own navigation (`epub_nav.ts`), its links and images rewritten to the
 * files the worker writes (`epub_links.ts`). An archive or package document that cannot be read is
 * an `UnreadableBookError` naming what is wrong; a spine item that cannot be shown is skipped with
 * a warning ("a JPEG page in the spine failed the whole book").
 *
 * Linear in the book: one pass over the archive per kind of file (package, navigation, resources)
 * and per `DOCUMENT_BATCH_BYTES` of content documents, one parse per content document (the
 * sanitiser walks the parsed tree; nothing is serialised and parsed again), and no tree kept once
 * its chapter is rendered.
 *
 * @module
 */
import {
  type BookWarning,
  type BookWarningKind,
  collapseWhitespace,
  describeParseError,
  type ExtractedBook,
  fileStem,
  unreadableBook,
  type UnreadableBookError,
} from "./book.ts";
import { BinaryDataError } from "./decode.ts";
import { type Archive, decodeEntry, openArchive } from "./epub_archive.ts";
import {
  collectResources,
  directoryOf,
  finishLinks,
  LinkRewriter,
  type RenderedChapter,
  resolveHref,
} from "./epub_links.ts";
import { renderDocument } from "./epub_document.ts";
import { EpubFrame } from "./epub_gutenberg.ts";
import { readNav } from "./epub_nav.ts";
import { attribute, field, list, readAuthor, readDirection, text, xml } from "./epub_package.ts";
import {
  escapeHtml,
  htmlText,
  sanitizeChapterHtml,
  type SanitizedHtml,
  sanitizeSvgFile,
} from "./sanitize.ts";
import { refuseEncrypted } from "./epub_encryption.ts";

const CONTAINER = "META-INF/container.xml";
const OPF_MEDIA_TYPE = "application/oebps-package+xml";

/** Unpacked bytes of content documents read in one pass over the archive (see `documentReader`). */
const DOCUMENT_BATCH_BYTES = 4 * 1024 * 1024;

/** Warnings kept per book: a book with thousands of broken links needs the first few, not all. */
const MAX_WARNINGS = 50;

/** A manifest item, its href resolved to the archive entry it names (`null`: not in the archive). */
interface ManifestItem {
  id: string;
  href: string;
  path: string | null;
  mediaType: string;
  fallback: string | null;
  properties: string;
}

/** What a spine item is shown as: a content document, a standalone SVG, or an image page. */
interface Page {
  kind: "xhtml" | "svg" | "image";
  path: string;
}

/**
 * Read an EPUB (2 or 3) into one chapter per spine item that shows something, in spine order; a
 * document whose navigation entries name several chapter headings in it is one chapter per
 * heading (`epub_split.ts`).
 *
 * Every spine item is included, `linear="no"` ones too. A non-XHTML item follows its manifest
 * `fallback` chain to an XHTML one, else is shown as itself when it is SVG (inline) or an image
 * (an image page), else skipped with a `spine_item_skipped` warning; so is an item missing from the
 * manifest or the archive, and one that shows nothing. A chapter's title is, in order: the label
 * the navigation gives its document (EPUB 3 nav, else NCX); its first top-ranked heading (an
 * `hgroup`'s parts joined by ": ", or an `h1`–`h6`); its `<title>` (an SVG's `<title>`) unless
 * that is just the book's title again (fixed-layout books); else `Chapter N` (`Page N` in a
 * fixed-layout book). The heading the title came from is left out of the html (its `id`s stay).
 * The book's title is the first non-blank `dc:title`, else the file name's stem; the author the
 * `dc:creator`s with `aut` among their roles or no role, joined with `", "`, else `null`;
 * language the first `dc:language`; direction the spine's `page-progression-direction`, else
 * right to left for a right-to-left language, else left to right when the language is known.
 *
 * @param bytes the file's bytes.
 * @param path the file's path, for error messages (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book, its chapters' links rewritten to `<n>.html#id` and `res/…`, the resources
 *   they use, and its warnings; `chapters` may be empty (every item skipped), which the caller
 *   rejects.
 * @throws UnreadableBookError when the file is not a ZIP archive or is truncated, lacks
 *   `META-INF/container.xml` or the package document it names, has an empty spine, a file over the
 *   unpacked size limits, a package document that cannot be parsed, or a content document that
 *   cannot be parsed (nested too deeply included).
 */
export function extractEpub(bytes: Uint8Array, path: string, signal: AbortSignal): ExtractedBook {
  const fail = (reason: string, cause?: unknown): UnreadableBookError =>
    unreadableBook("epub", path, reason, cause);
  const warnings: BookWarning[] = [];
  const seen = new Set<string>();
  const warn = (kind: BookWarningKind, message: string): void => {
    if (seen.has(message)) return;
    seen.add(message);
    if (warnings.length < MAX_WARNINGS) warnings.push({ kind, message });
  };
  const archive = openArchive(bytes, fail);
  refuseEncrypted(archive, fail);
  const guessed = (message: string): void => warn("encoding_guessed", message);
  const readXml = (name: string): unknown =>
    parseXml(unpackOne(archive, name), name, fail, guessed);

  const containerPath = archive.find(CONTAINER);
  if (containerPath === null) throw fail(`"${CONTAINER}" is missing`);
  const rootfiles = list(
    field(field(readXml(containerPath), "container"), "rootfiles"),
    "rootfile",
  );
  const rootfile = rootfiles.find((entry) => attribute(entry, "media-type") === OPF_MEDIA_TYPE) ??
    rootfiles[0];
  const opfHref = attribute(rootfile, "full-path");
  if (!opfHref) throw fail(`"${CONTAINER}" names no package document`);
  const opfPath = archive.find(resolveHref("", opfHref).path);
  if (opfPath === null) {
    throw fail(`package document "${opfHref}" named in "${CONTAINER}" is missing`);
  }

  const opf = field(readXml(opfPath), "package");
  if (opf === undefined) throw fail(`"${opfPath}" is not an OPF package document`);
  const metadata = field(opf, "metadata");
  const title = list(metadata, "title").map((node) => collapseWhitespace(text(node)))
    .find((value) => value !== "") ?? fileStem(path);
  const language = list(metadata, "language").map((node) => collapseWhitespace(text(node)))
    .find((value) => value !== "") ?? null;
  const fixedLayout = list(metadata, "meta").some((meta) =>
    attribute(meta, "property") === "rendition:layout" && text(meta).trim() === "pre-paginated"
  );

  const manifest = new Map<string, ManifestItem>();
  for (const item of list(field(opf, "manifest"), "item")) {
    const id = attribute(item, "id");
    const href = attribute(item, "href") ?? "";
    if (id === null) continue;
    manifest.set(id, {
      id,
      href,
      path: href === "" ? null : archive.find(resolveHref(directoryOf(opfPath), href).path),
      mediaType: (attribute(item, "media-type") ?? "").toLowerCase(),
      fallback: attribute(item, "fallback"),
      properties: attribute(item, "properties") ?? "",
    });
  }
  const spineNode = field(opf, "spine");
  const spine = list(spineNode, "itemref");
  if (spine.length === 0) throw fail("the spine lists no chapters");

  const pages = spine.map((itemref, index) => choosePage(itemref, index, manifest, warn));
  const spineIndex = new Map<string, number>();
  for (const [index, page] of pages.entries()) {
    if (page !== null && !spineIndex.has(page.path)) spineIndex.set(page.path, index);
  }
  const mediaTypes = new Map<string, string>();
  for (const item of manifest.values()) {
    if (item.path !== null) mediaTypes.set(item.path, item.mediaType);
  }
  const links = new LinkRewriter(archive, spineIndex, mediaTypes, warn);
  const coverImage = coverImagePath(metadata, manifest);
  const cover = (): string | null => coverImage === null ? null : links.registered(coverImage);
  const items = [...manifest.values()];
  const tocId = attribute(spineNode, "toc");
  const nav = readNav(archive, {
    nav: items.find((item) => /(^|\s)nav(\s|$)/.test(item.properties))?.path ?? null,
    ncx: (tocId === null ? undefined : manifest.get(tocId))?.path ??
      items.find((item) => item.mediaType === "application/x-dtbncx+xml")?.path ?? null,
  }, (bytes) => xml.parse(decodeEntry(bytes, "", "xml", () => {})) as unknown);

  const documents = documentReader(
    archive,
    pages.flatMap((page) => page !== null && page.kind !== "image" ? [page.path] : []),
  );
  const rendered: Array<RenderedChapter & { title: string }> = [];
  const frame = new EpubFrame();
  for (const [index, page] of pages.entries()) {
    signal.throwIfAborted();
    if (page === null) continue;
    const fallbackTitle = `${fixedLayout ? "Page" : "Chapter"} ${rendered.length + 1}`;
    const untitled = (html: string): string => shows(html, cover) ? "Cover" : fallbackTitle;
    const label = nav.labels.get(page.path) ?? null;
    let chapters: Array<SanitizedHtml & { title: string; framed?: boolean; continues?: boolean }>;
    if (page.kind === "image") {
      const src = links.resourceFor(page.path);
      const alt = escapeHtml(label ?? "");
      chapters = [{
        title: label ?? (page.path === coverImage ? "Cover" : fallbackTitle),
        ...(src === null
          ? { html: "", blank: true }
          : sanitizeChapterHtml(`<p><img src="${src}" alt="${alt}"/></p>`)),
      }];
    } else {
      const source = documents(page.path);
      if (source === undefined) continue;
      let text: string;
      try {
        text = decodeEntry(source, page.path, page.kind === "svg" ? "xml" : "html", guessed);
      } catch (error) {
        if (!(error instanceof BinaryDataError)) throw error;
        warn("spine_item_skipped", `Spine item "${page.path}" is not text; it was left out`);
        continue;
      }
      try {
        const entries = nav.entries.get(page.path) ?? [];
        chapters = renderDocument(text, page, label, title, language, links, frame, entries);
      } catch (error) {
        // Caught here, not only in the dispatcher, to name the chapter file that is at fault.
        throw fail(`"${page.path}" could not be parsed: ${describeParseError(error)}`, error);
      }
      for (const chapter of chapters) chapter.title ||= untitled(chapter.html);
    }
    for (const chapter of chapters) {
      // A page that held only the Gutenberg frame (the licence) is the edition's metadata.
      if (chapter.blank && chapter.framed) continue;
      if (chapter.blank) {
        warn("spine_item_skipped", `Spine item "${page.path}" shows nothing; it was left out`);
        continue;
      }
      // The end of the last chapter of the previous document, split from it by size.
      const previous = rendered.at(-1);
      if (chapter.continues && previous !== undefined) previous.html += `\n${chapter.html}`;
      else rendered.push({ spineIndex: index, title: chapter.title, html: chapter.html });
    }
  }

  const htmls = finishLinks(rendered, spine.length);
  const resources = collectResources(
    archive,
    links.resources(),
    (svg) => new TextEncoder().encode(sanitizeSvgFile(svgText(svg))),
  );
  const rights = list(metadata, "rights").map((node) => collapseWhitespace(text(node)))
    .filter((value) => value !== "");
  return {
    format: "epub",
    title,
    author: readAuthor(metadata),
    licence: frame.licence() ?? (rights.length === 0 ? null : rights.join("\n")),
    language,
    direction: readDirection(attribute(spineNode, "page-progression-direction"), language),
    warnings,
    resources,
    chapters: rendered.map((chapter, i) => ({ title: chapter.title, html: htmls[i] })),
  };
}

type Fail = (reason: string, cause?: unknown) => UnreadableBookError;

/**
 * What a spine item is shown as: the first XHTML item along its fallback chain, else the first
 * SVG, else the first image; `null` (with a warning) when there is none.
 */
function choosePage(
  itemref: unknown,
  index: number,
  manifest: ReadonlyMap<string, ManifestItem>,
  warn: (kind: BookWarningKind, message: string) => void,
): Page | null {
  const idref = attribute(itemref, "idref");
  const chain: ManifestItem[] = [];
  for (let item = idref === null ? undefined : manifest.get(idref); item !== undefined;) {
    if (chain.includes(item)) break;
    chain.push(item);
    item = item.fallback === null ? undefined : manifest.get(item.fallback);
  }
  const present = chain.filter((item) => item.path !== null);
  const pick = (kind: Page["kind"], test: (item: ManifestItem) => boolean): Page | null => {
    const item = present.find(test);
    return item === undefined ? null : { kind, path: item.path! };
  };
  const page = pick("xhtml", isXhtml) ??
    pick("svg", (item) => item.mediaType === "image/svg+xml") ??
    pick("image", (item) => item.mediaType.startsWith("image/"));
  if (page === null) {
    const what = chain.length === 0
      ? `Spine item "${idref ?? index + 1}" is not in the manifest`
      : present.length === 0
      ? `Spine item "${chain[0].href}" is not in the archive`
      : `Spine item "${chain[0].href}" (${chain[0].mediaType || "no media type"}) cannot be shown`;
    warn("spine_item_skipped", `${what}; it was left out`);
  }
  return page;
}

function isXhtml(item: ManifestItem): boolean {
  return /^(application\/xhtml\+xml|text\/html|application\/x-dtbook\+xml)$/.test(item.mediaType) ||
    (item.mediaType === "" && /\.x?html?$/i.test(item.href));
}

/**
 * The content documents' bytes, each handed out once, in the order they are asked for: unpacked
 * `DOCUMENT_BATCH_BYTES` at a time, so a big book never holds all of its text unpacked at once
 * ("Extraction time and memory grow linearly with the book").
 *
 * @param paths the documents in reading order; a path may repeat (a spine item listed twice).
 * @returns a reader: the bytes of a path asked for the first time, `undefined` after that or
 *   when the archive lacks it.
 */
function documentReader(
  archive: Archive,
  paths: string[],
): (path: string) => Uint8Array | undefined {
  const order = [...new Set(paths)];
  const done = new Set<string>();
  let batch = new Map<string, Uint8Array>();
  let next = 0;
  return (path) => {
    if (done.has(path)) return undefined;
    done.add(path);
    while (!batch.has(path) && next < order.length) {
      const names: string[] = [];
      for (
        let size = 0;
        next < order.length && (names.length === 0 || size < DOCUMENT_BATCH_BYTES);
      ) {
        names.push(order[next]);
        size += archive.size(order[next]);
        next += 1;
      }
      batch = archive.unpack(names);
    }
    const bytes = batch.get(path);
    batch.delete(path);
    return bytes;
  };
}

/**
 * The archive path of the book's cover image: the manifest item with the `cover-image` property
 * (EPUB 3), else the image EPUB 2's `<meta name="cover" content="id">` names; `null` when none.
 */
function coverImagePath(
  metadata: unknown,
  manifest: ReadonlyMap<string, ManifestItem>,
): string | null {
  const items = [...manifest.values()].filter((item) => item.path !== null);
  const declared = items.find((item) => /(^|\s)cover-image(\s|$)/.test(item.properties));
  if (declared !== undefined) return declared.path;
  const id = list(metadata, "meta").find((meta) => attribute(meta, "name") === "cover");
  const named = manifest.get(attribute(id, "content") ?? "");
  return named?.path != null && named.mediaType.startsWith("image/") ? named.path : null;
}

/**
 * Whether a page shows the cover image and no text: the cover page, which the navigation seldom
 * names and whose `<title>` is the book's.
 */
function shows(html: string, cover: () => string | null): boolean {
  const path = cover();
  return path !== null && html.includes(`="${path}"`) && htmlText(html) === "";
}

function unpackOne(archive: Archive, name: string): Uint8Array {
  return archive.unpack([name]).get(name) ?? new Uint8Array();
}

function parseXml(
  bytes: Uint8Array,
  name: string,
  fail: Fail,
  guessed: (message: string) => void,
): unknown {
  try {
    return xml.parse(decodeEntry(bytes, name, "xml", guessed)) as unknown;
  } catch (error) {
    throw fail(`"${name}" is not valid XML: ${errorMessage(error)}`, error);
  }
}

/**
 * An SVG file's text for the sanitiser; one that is not text at all is read as Windows-1252, so
 * whatever it holds is sanitised rather than written as it came.
 */
function svgText(bytes: Uint8Array): string {
  try {
    return decodeEntry(bytes, "", "xml", () => {});
  } catch (error) {
    if (!(error instanceof BinaryDataError)) throw error;
    return new TextDecoder("windows-1252").decode(bytes);
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
