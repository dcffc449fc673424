/**
 * Links inside an EPUB, rewritten for the files the worker writes ("links keep the
 * EPUB's file names while the chapters are written as `N.html`"). Chapters are written as
 * `<n>.html` and resources as `res/<k>-<name>`, side by side in the edition's version folder, so
 * every rewritten link is relative and works when a chapter is opened straight from disk.
 *
 * Two steps, because which spine items become chapters (a blank one is skipped) and which `id`s a
 * chapter keeps are known only once every chapter is rendered:
 * 1. {@linkcode LinkRewriter.rewrite}, per content document, before it is sanitised: a link to a
 *    spine item becomes the placeholder `spine-<index>.html#fragment`; a file the chapter shows
 *    (image, audio, video) becomes its resource path; a link or image whose target is not in the
 *    book is removed (an image leaves its alt text) with a `resource_missing` warning.
 * 2. {@linkcode finishLinks}, once every chapter is rendered: each placeholder becomes `<n>.html`
 *    of the chapter written for that spine item (the next one when it was skipped; of a spine item
 *    split into several chapters, the one that has the `#fragment`'s `id`, else its first), with
 *    its `#fragment` kept when that chapter has the `id`, and `#fragment` alone within a chapter.
 *
 * @module
 */
import { type ChildNode, Element, isTag, Text } from "domhandler";
import { DomUtils } from "htmlparser2";
import type { BookResource, BookWarningKind } from "./book.ts";
import type { Archive } from "./epub_archive.ts";

/** A relative href split and resolved against its document: an archive path and a fragment. */
export interface ResolvedHref {
  /** Entry path as written (resolved, `..` applied, percent-escapes decoded); not yet `find`-ed. */
  path: string;
  /** The `#fragment`, percent-escapes decoded; `null` when there is none. */
  fragment: string | null;
}

/** Whether an href names its own scheme (`https:`, `mailto:`, `javascript:`) or host (`//`). */
export function isExternal(href: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//");
}

/**
 * Resolve a relative href against the directory of the document it appears in.
 *
 * @param directory the document's directory inside the archive, `""` or ending in `/`.
 * @param href a relative href; a query is dropped.
 * @returns the archive path and fragment; the path is `directory`'s file itself when the href is
 *   only a fragment (the caller passes the document's own path then).
 */
export function resolveHref(directory: string, href: string): ResolvedHref {
  const hash = href.indexOf("#");
  const rawFragment = hash === -1 ? null : href.slice(hash + 1);
  const bare = (hash === -1 ? href : href.slice(0, hash)).replace(/\?.*$/, "");
  const segments: string[] = [];
  for (const segment of (directory + safeDecode(bare)).split(/[/\\]/)) {
    if (segment === ".." && segments.length > 0) segments.pop();
    else if (segment !== "" && segment !== "." && segment !== "..") segments.push(segment);
  }
  return {
    path: segments.join("/"),
    fragment: rawFragment === null || rawFragment === "" ? null : safeDecode(rawFragment),
  };
}

/** The directory part of an archive path: `"OPS/text/"` for `"OPS/text/c1.xhtml"`. */
export function directoryOf(path: string): string {
  return path.slice(0, path.lastIndexOf("/") + 1);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    // A stray `%` is a literal character in a malformed href.
    return text;
  }
}

/** MIME types of the files written beside the chapters, by extension, when the manifest is silent. */
const MEDIA_TYPES: ReadonlyMap<string, string> = new Map(Object.entries({
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  png: "image/png",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  avif: "image/avif",
  bmp: "image/bmp",
  mp3: "audio/mpeg",
  m4a: "audio/mp4",
  ogg: "audio/ogg",
  mp4: "video/mp4",
  webm: "video/webm",
  vtt: "text/vtt",
}));

/** Whether a file of this type may be written beside the chapters (what a chapter can show). */
function isShowable(mediaType: string): boolean {
  return /^(image|audio|video)\//.test(mediaType) || mediaType === "text/vtt";
}

/** Attributes holding the URL of a file an element shows, by element. */
const SOURCE_ATTRIBUTES: ReadonlyMap<string, readonly string[]> = new Map(Object.entries({
  img: ["src"],
  image: ["href", "xlink:href"],
  source: ["src"],
  audio: ["src"],
  video: ["src", "poster"],
  track: ["src"],
}));

/** Records a warning; the caller caps and deduplicates. */
export type Warn = (kind: BookWarningKind, message: string) => void;

/**
 * Step 1 of the rewrite, shared by every content document of one book: it knows which archive
 * paths are spine items and names each resource once, however many chapters show it.
 */
export class LinkRewriter {
  readonly #archive: Archive;
  readonly #spineIndex: ReadonlyMap<string, number>;
  readonly #mediaTypes: ReadonlyMap<string, string>;
  readonly #warn: Warn;
  /** Archive path → the resource written for it. */
  readonly #resources = new Map<string, { path: string; mediaType: string }>();

  /**
   * @param archive the book's archive.
   * @param spineIndex canonical archive path → its index in the spine.
   * @param mediaTypes canonical archive path → manifest media type.
   * @param warn receives `resource_missing` warnings.
   */
  constructor(
    archive: Archive,
    spineIndex: ReadonlyMap<string, number>,
    mediaTypes: ReadonlyMap<string, string>,
    warn: Warn,
  ) {
    this.#archive = archive;
    this.#spineIndex = spineIndex;
    this.#mediaTypes = mediaTypes;
    this.#warn = warn;
  }

  /**
   * Rewrite every link and source in a document's nodes, in place, in one walk; `xml:lang`
   * becomes `lang` on the way (the sanitiser keeps only `lang`).
   *
   * @param nodes the nodes that will become the chapter.
   * @param documentPath the canonical archive path of the document they come from.
   */
  rewrite(nodes: ChildNode[], documentPath: string): void {
    const directory = directoryOf(documentPath);
    const visit = (children: ChildNode[]): void => {
      // A copy: rewriting a broken image replaces it in its parent's list.
      for (const node of [...children]) {
        if (!isTag(node)) continue;
        const attribs = node.attribs;
        if (attribs["xml:lang"] !== undefined && attribs.lang === undefined) {
          attribs.lang = attribs["xml:lang"];
        }
        if ((node.name === "a" || node.name === "area") && attribs.href !== undefined) {
          this.#rewriteLink(node, directory, documentPath);
        }
        const sources = SOURCE_ATTRIBUTES.get(node.name);
        if (sources !== undefined) {
          for (const name of sources) {
            if (attribs[name] !== undefined) this.#rewriteSource(node, name, directory);
          }
        }
        visit(node.children);
      }
    };
    visit(nodes);
  }

  /**
   * The resource path for a file the chapters show (registering it on first use), or `null` when
   * it is not in the archive or is not a kind of file a chapter can show.
   *
   * @param archivePath a canonical archive path.
   */
  resourceFor(archivePath: string): string | null {
    const known = this.#resources.get(archivePath);
    if (known !== undefined) return known.path;
    const extension = /\.([A-Za-z0-9]+)$/.exec(archivePath)?.[1].toLowerCase() ?? "";
    const mediaType = this.#mediaTypes.get(archivePath) ?? MEDIA_TYPES.get(extension) ?? "";
    if (!isShowable(mediaType)) return null;
    const base = archivePath.slice(archivePath.lastIndexOf("/") + 1);
    // Numbered, and only safe characters: two folders may hold the same name, and a name is not
    // trusted to stay inside the version folder.
    const safe = base.normalize("NFC").replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^\.+/, "_")
      .slice(-80);
    const path = `res/${this.#resources.size + 1}-${safe}`;
    this.#resources.set(archivePath, { path, mediaType });
    return path;
  }

  /**
   * The resource path already given to a file, without registering it.
   *
   * @param archivePath a canonical archive path.
   * @returns its `res/…` path, or `null` when no chapter has shown it yet.
   */
  registered(archivePath: string): string | null {
    return this.#resources.get(archivePath)?.path ?? null;
  }

  /** Every resource registered so far: archive path, written path, media type. */
  resources(): Array<{ archivePath: string; path: string; mediaType: string }> {
    return [...this.#resources].map(([archivePath, r]) => ({ archivePath, ...r }));
  }

  #rewriteLink(element: Element, directory: string, documentPath: string): void {
    const href = element.attribs.href.trim();
    if (isExternal(href)) return;
    const resolved = href.startsWith("#") || href === ""
      ? { path: documentPath, fragment: resolveHref("", href).fragment }
      : resolveHref(directory, href);
    const found = this.#archive.find(resolved.path);
    const index = found === null ? undefined : this.#spineIndex.get(found);
    if (index !== undefined) {
      element.attribs.href = placeholder(index, resolved.fragment);
      return;
    }
    const resource = found === null ? null : this.resourceFor(found);
    if (resource !== null) {
      element.attribs.href = resource;
      return;
    }
    delete element.attribs.href;
    this.#warn(
      "resource_missing",
      found === null
        ? `Link target "${resolved.path}" is not in the book; the link was removed`
        : `Link target "${found}" is not a chapter or an image; the link was removed`,
    );
  }

  #rewriteSource(element: Element, name: string, directory: string): void {
    const url = element.attribs[name].trim();
    if (isExternal(url)) return;
    const found = this.#archive.find(resolveHref(directory, url).path);
    const resource = found === null ? null : this.resourceFor(found);
    if (resource !== null) {
      element.attribs[name] = resource;
      return;
    }
    this.#warn(
      "resource_missing",
      `${element.name === "img" ? "Image" : "File"} "${
        found ?? resolveHref(directory, url).path
      }" is ${found === null ? "not in the book" : "not a kind of file a chapter can show"}`,
    );
    if (element.name === "img") {
      // A broken image icon shows nothing; its alt text at least says what was meant.
      const alt = element.attribs.alt ?? "";
      if (alt.trim() === "") DomUtils.removeElement(element);
      else DomUtils.replaceElement(element, new Text(alt));
    } else {
      delete element.attribs[name];
    }
  }
}

function placeholder(index: number, fragment: string | null): string {
  return `spine-${index}.html${fragment === null ? "" : `#${fragment}`}`;
}

/** A rendered chapter as {@linkcode finishLinks} needs it. */
export interface RenderedChapter {
  /** The spine index it was rendered from. */
  spineIndex: number;
  /** Sanitised html, with placeholders. */
  html: string;
}

const PLACEHOLDER = /\shref="spine-(\d+)\.html(?:#([^"]*))?"/g;
const ID = /\sid="([^"]*)"/g;

/**
 * Step 2: turn every placeholder into the chapter file written for its spine item.
 *
 * @param chapters the chapters in reading order; chapter `i` is written as `<i + 1>.html`.
 * @param spineLength how many items the spine has.
 * @returns each chapter's final html, in order.
 */
export function finishLinks(chapters: readonly RenderedChapter[], spineLength: number): string[] {
  // Spine index → chapter number; a skipped item forwards to the next chapter (the last one at
  // the end), where a reader following the link would have gone on to.
  const numberOf = new Array<number>(spineLength + 1).fill(0);
  for (const [i, chapter] of chapters.entries()) {
    if (numberOf[chapter.spineIndex] === 0) numberOf[chapter.spineIndex] = i + 1;
  }
  for (let k = spineLength - 1, next = chapters.length; k >= 0; k--) {
    if (numberOf[k] === 0) numberOf[k] = next;
    else next = numberOf[k];
  }
  // Ids are compared as written in the html: the sanitiser escaped them and the fragments alike.
  const ids = chapters.map((chapter) => new Set([...chapter.html.matchAll(ID)].map((m) => m[1])));
  // "<spine index>#<id>" → the chapter holding that id: of a spine item split into several
  // chapters (`epub_split.ts`), the one the id went to.
  const holders = new Map<string, number>();
  for (const [i, chapter] of chapters.entries()) {
    for (const id of ids[i]) {
      const key = `${chapter.spineIndex}#${id}`;
      if (!holders.has(key)) holders.set(key, i + 1);
    }
  }
  return chapters.map((chapter, i) =>
    chapter.html.replace(PLACEHOLDER, (_match, index: string, fragment?: string) => {
      const holder = fragment === undefined ? undefined : holders.get(`${index}#${fragment}`);
      const target = holder ?? numberOf[Number(index)] ?? chapters.length;
      const keep = fragment !== undefined && ids[target - 1]?.has(fragment);
      if (target === i + 1) return keep ? ` href="#${fragment}"` : ` href="${target}.html"`;
      return keep ? ` href="${target}.html#${fragment}"` : ` href="${target}.html"`;
    })
  );
}

/**
 * Take an element out of the tree, leaving an empty `<span id>` for each `id` in it, so a link to
 * the heading that became the chapter title still lands.
 *
 * @param element the element to remove.
 * @returns a function that puts the element back where it was, in place of those spans.
 */
export function removeKeepingIds(element: Element): () => void {
  const ids = [element, ...DomUtils.findAll(() => true, element.children)]
    .map((node) => node.attribs.id)
    .filter((id): id is string => id !== undefined && id !== "");
  const { parent, prev, next } = element;
  const spans = ids.map((id) => new Element("span", { id }));
  for (const span of spans) DomUtils.prepend(element, span);
  DomUtils.removeElement(element);
  return () => {
    for (const span of spans) DomUtils.removeElement(span);
    // Its neighbours, unless the link rewrite replaced them (a broken image left as its alt).
    if (prev !== null && prev.parent === parent) DomUtils.append(prev, element);
    else if (next !== null && next.parent === parent) DomUtils.prepend(next, element);
    else if (parent !== null) DomUtils.prependChild(parent, element);
  };
}

/** The bytes of each resource, unpacked in one pass; an SVG is sanitised by `sanitizeSvg`. */
export function collectResources(
  archive: Archive,
  registered: ReadonlyArray<{ archivePath: string; path: string; mediaType: string }>,
  sanitizeSvg: (bytes: Uint8Array) => Uint8Array,
): BookResource[] {
  const files = archive.unpack(registered.map((r) => r.archivePath));
  return registered.map((r) => {
    const bytes = files.get(r.archivePath) ?? new Uint8Array();
    return {
      path: r.path,
      mediaType: r.mediaType,
      bytes: r.mediaType === "image/svg+xml" ? sanitizeSvg(bytes) : bytes,
    };
  });
}
