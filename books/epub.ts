/**
 * EPUB books: the ZIP archive, `META-INF/container.xml` → the OPF package document → its
 * metadata (`dc:title`, `dc:creator`), manifest and spine, and one chapter per spine item in spine
 * order. Every way the archive can be broken is an `UnreadableBookError` naming what is wrong.
 *
 * @module
 */
import { type UnzipFileInfo, unzipSync } from "fflate";
import { XMLParser } from "fast-xml-parser";
import {
  collapseWhitespace,
  describeParseError,
  type ExtractedBook,
  type ExtractedChapter,
  fileStem,
  unreadableBook,
  type UnreadableBookError,
} from "./book.ts";
import { parseHtmlPage, renderChapterHtml, takeFirstElement } from "./html.ts";
import { refuseEncrypted } from "./epub_encryption.ts";

/** Largest unpacked size of one XML or XHTML file read from an EPUB, in bytes (64 MiB). */
const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

/** Largest unpacked size of all files read from one EPUB, in bytes (256 MiB): a ZIP bomb guard. */
const MAX_UNPACKED_BYTES = 256 * 1024 * 1024;

const CONTAINER = "META-INF/container.xml";
const OPF_MEDIA_TYPE = "application/oebps-package+xml";

/** Elements that may repeat, so fast-xml-parser always gives them as arrays. */
const REPEATED = new Set(["rootfile", "item", "itemref", "title", "creator", "meta"]);

// removeNSPrefix: `dc:title`, `opf:role` and unprefixed names all read the same. Values stay
// strings (parseTagValue: false), or a title "1984" would come back as a number.
const xml = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@_",
  removeNSPrefix: true,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  isArray: (name, _path, _leaf, isAttribute) => !isAttribute && REPEATED.has(name),
});

/**
 * Read an EPUB (2 or 3) into one chapter per spine item, in spine order.
 *
 * Every spine item is included, `linear="no"` ones too. A chapter's title is the text of its first
 * `h1`/`h2`/`h3` (that heading is then left out of its html), else its `<title>`, else
 * `Chapter N` for the Nth spine item. The book's title is the first non-blank `dc:title`, else the
 * file name's stem; the author the `dc:creator`s whose role is author or unstated, joined with
 * `", "`, else `null`.
 *
 * @param bytes the file's bytes.
 * @param path the file's path, for error messages (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book, with at least one chapter.
 * @throws UnreadableBookError when the file is not a ZIP archive or is truncated, lacks
 *   `META-INF/container.xml` or the package document it names, has an empty spine, a spine idref
 *   missing from the manifest, a manifest href missing from the archive, a file over the unpacked
 *   size limits, or XML or XHTML that is not valid UTF-8 or cannot be parsed (a chapter nested
 *   too deeply included).
 */
export function extractEpub(bytes: Uint8Array, path: string, signal: AbortSignal): ExtractedBook {
  const fail = (reason: string, cause?: unknown): UnreadableBookError =>
    unreadableBook("epub", path, reason, cause);
  const archive = openArchive(bytes, fail);
  refuseEncrypted(archive, fail);

  if (!archive.sizes.has(CONTAINER)) throw fail(`"${CONTAINER}" is missing`);
  const container = parseXml(archive.unpack(CONTAINER), CONTAINER, fail);
  const rootfiles = list(field(field(container, "container"), "rootfiles"), "rootfile");
  const rootfile = rootfiles.find((entry) => attribute(entry, "media-type") === OPF_MEDIA_TYPE) ??
    rootfiles[0];
  const opfPath = attribute(rootfile, "full-path");
  if (!opfPath) throw fail(`"${CONTAINER}" names no package document`);
  if (!archive.sizes.has(opfPath)) {
    throw fail(`package document "${opfPath}" named in "${CONTAINER}" is missing`);
  }

  const opf = field(parseXml(archive.unpack(opfPath), opfPath, fail), "package");
  if (opf === undefined) throw fail(`"${opfPath}" is not an OPF package document`);
  const metadata = field(opf, "metadata");
  const title = list(metadata, "title").map((node) => collapseWhitespace(text(node)))
    .find((value) => value !== "") ?? fileStem(path);

  const manifest = new Map<string, string>();
  for (const item of list(field(opf, "manifest"), "item")) {
    const id = attribute(item, "id");
    if (id !== null) manifest.set(id, attribute(item, "href") ?? "");
  }
  const spine = list(field(opf, "spine"), "itemref");
  if (spine.length === 0) throw fail("the spine lists no chapters");
  const opfDirectory = opfPath.slice(0, opfPath.lastIndexOf("/") + 1);
  const files = spine.map((itemref, index) => {
    const idref = attribute(itemref, "idref");
    if (!idref) throw fail(`spine item "${index + 1}" has no idref`);
    const href = manifest.get(idref);
    if (href === undefined) throw fail(`spine item "${idref}" is not in the manifest`);
    const file = resolveHref(opfDirectory, href);
    if (!archive.sizes.has(file)) {
      throw fail(`spine item "${idref}" points to missing file "${file}"`);
    }
    return file;
  });

  const documents = archive.unpackAll(new Set(files));
  const chapters: ExtractedChapter[] = files.map((file, index) => {
    signal.throwIfAborted();
    const source = decode(documents[file], file, fail);
    try {
      const page = parseHtmlPage(source);
      const heading = takeFirstElement(page.body, ["h1", "h2", "h3"]);
      return {
        title: heading || page.title || `Chapter ${index + 1}`,
        html: renderChapterHtml(page.body),
      };
    } catch (error) {
      // Caught here, not only in the dispatcher, to name the chapter file that is at fault.
      throw fail(`"${file}" could not be parsed: ${describeParseError(error)}`, error);
    }
  });
  return { format: "epub", title, author: readAuthor(metadata), chapters };
}

type Fail = (reason: string, cause?: unknown) => UnreadableBookError;

interface Archive {
  /** Every entry's name → its unpacked size as the archive declares it, in bytes. */
  sizes: Map<string, number>;
  /** Unpack one entry, which must exist. */
  unpack(name: string): Uint8Array;
  /** Unpack entries, which must exist, in one pass over the archive. */
  unpackAll(names: Set<string>): Record<string, Uint8Array>;
}

function openArchive(bytes: Uint8Array, fail: Fail): Archive {
  const sizes = new Map<string, number>();
  try {
    // A filter that takes nothing walks the central directory without inflating anything; a
    // truncated archive has lost its end-of-central-directory record and fails here.
    unzipSync(bytes, {
      filter: (file: UnzipFileInfo) => {
        sizes.set(file.name, file.originalSize);
        return false;
      },
    });
  } catch (error) {
    throw fail("the file is not a valid ZIP archive", error);
  }
  let unpacked = 0;
  const unpackAll = (names: Set<string>): Record<string, Uint8Array> => {
    for (const name of names) {
      // fflate inflates into a buffer of the declared size and never grows it, so checking the
      // declared sizes bounds the memory even when an entry lies about its size.
      const size = sizes.get(name) ?? 0;
      if (size > MAX_ENTRY_BYTES) {
        throw fail(`"${name}" unpacks to more than "${MAX_ENTRY_BYTES}" bytes`);
      }
      unpacked += size;
    }
    if (unpacked > MAX_UNPACKED_BYTES) {
      throw fail(`its text unpacks to more than "${MAX_UNPACKED_BYTES}" bytes`);
    }
    try {
      return unzipSync(bytes, { filter: (file) => names.has(file.name) });
    } catch (error) {
      throw fail(`the ZIP archive is damaged: ${errorMessage(error)}`, error);
    }
  };
  return { sizes, unpackAll, unpack: (name) => unpackAll(new Set([name]))[name] };
}

function decode(bytes: Uint8Array, name: string, fail: Fail): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (error) {
    throw fail(`"${name}" is not valid UTF-8`, error);
  }
}

function parseXml(bytes: Uint8Array, name: string, fail: Fail): unknown {
  const source = decode(bytes, name, fail);
  try {
    return xml.parse(source) as unknown;
  } catch (error) {
    throw fail(`"${name}" is not valid XML: ${errorMessage(error)}`, error);
  }
}

/**
 * The authors among the `dc:creator`s: role `aut` or no role, where the role is EPUB 2's
 * `opf:role` attribute or an EPUB 3 `<meta refines="#id" property="role">`.
 */
function readAuthor(metadata: unknown): string | null {
  const refinedRoles = new Map<string, string>();
  for (const meta of list(metadata, "meta")) {
    const refines = attribute(meta, "refines");
    if (attribute(meta, "property") === "role" && refines !== null) {
      refinedRoles.set(refines, text(meta).trim());
    }
  }
  const names = list(metadata, "creator").flatMap((creator) => {
    const id = attribute(creator, "id");
    const role = attribute(creator, "role") ?? (id === null ? null : refinedRoles.get(`#${id}`));
    const name = collapseWhitespace(text(creator));
    return (role === null || role === undefined || role === "aut") && name !== "" ? [name] : [];
  });
  return names.length > 0 ? names.join(", ") : null;
}

/**
 * Resolve a manifest href against the package document's directory into an archive entry name:
 * fragment and query dropped, percent-escapes decoded, `.` and `..` segments applied.
 */
function resolveHref(directory: string, href: string): string {
  const bare = href.replace(/[?#].*$/, "");
  let decoded = bare;
  try {
    decoded = decodeURIComponent(bare);
  } catch {
    // A stray `%` is a literal character in a malformed href; look the name up as written.
  }
  const segments: string[] = [];
  for (const segment of (directory + decoded).split("/")) {
    if (segment === ".." && segments.length > 0) segments.pop();
    else if (segment !== "" && segment !== "." && segment !== "..") segments.push(segment);
  }
  return segments.join("/");
}

// fast-xml-parser returns untyped trees; these read them without trusting their shape.

function field(node: unknown, name: string): unknown {
  return typeof node === "object" && node !== null
    ? (node as Record<string, unknown>)[name]
    : undefined;
}

function list(node: unknown, name: string): unknown[] {
  const value = field(node, name);
  if (Array.isArray(value)) return value;
  return value === undefined ? [] : [value];
}

function attribute(node: unknown, name: string): string | null {
  const value = field(node, `@_${name}`);
  return typeof value === "string" ? value : null;
}

function text(node: unknown): string {
  if (typeof node === "string") return node;
  const value = field(node, "#text");
  return typeof value === "string" ? value : "";
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
