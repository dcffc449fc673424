/**
 * What a book's resource really is, read from its bytes (npm `file-type`), never from the
 * manifest's word for it: a file declared `image/png` may hold HTML with a script, an SVG may be
 * declared `image/jpeg` or `image/svg+xml; charset=utf-8`. Whatever is stored beside the chapters
 * and published on the site is one of:
 * - an image, audio or video file as `file-type` recognises it (`image/*`, `audio/*`, `video/*`),
 *   or a WebVTT track (`text/vtt`), stored under the extension of its real type;
 * - an SVG document (its root element `svg`; `file-type` sees only XML), always sanitised as an
 *   SVG file (`sanitizeSvgFile`), stored as `.svg`.
 * Anything else (HTML, script, unknown bytes) is dropped, with a `resource_missing` warning, and
 * the chapters' references to it are taken out.
 *
 * @module
 */
import { fileTypeFromBuffer } from "file-type";
import type { BookResource, BookWarning, ExtractedBook } from "./book.ts";
import { BinaryDataError, decodeBookBytes } from "./decode.ts";
import { parseMarkup } from "./markup.ts";
import { sanitizeSvgFile } from "./sanitize.ts";

/** A resource's real type, and its bytes as they may be stored (an SVG sanitised). */
export interface VettedResource {
  /** The media type read from the bytes, e.g. `image/jpeg`, `image/svg+xml`. */
  mediaType: string;
  /** The extension that type is stored under, without the dot: `jpg`, `svg`, `mp3`. */
  extension: string;
  bytes: Uint8Array;
}

/** Media types a chapter may show once the bytes prove them: nothing here runs script. */
const SHOWABLE = /^(image|audio|video)\/[a-z0-9.+-]+$/;

/**
 * Read what a resource's bytes are.
 *
 * @param bytes the file as found in the book (or on disk).
 * @returns its real type, extension and storable bytes; `null` when it is none of the kinds
 *   above (HTML, script, an unknown or empty file), which must not be stored or published.
 */
export async function vetResource(bytes: Uint8Array): Promise<VettedResource | null> {
  const sniffed = await fileTypeFromBuffer(bytes);
  if (sniffed !== undefined && !sniffed.mime.includes("svg") && !sniffed.mime.includes("xml")) {
    // `audio/ogg; codecs=opus` and the like: the type itself, parameters dropped.
    const mime = sniffed.mime.split(";")[0].trim().toLowerCase();
    if (SHOWABLE.test(mime) || mime === "text/vtt") {
      return { mediaType: mime, extension: sniffed.ext.toLowerCase(), bytes };
    }
    return null;
  }
  const svg = svgText(bytes);
  if (svg === null) return null;
  return {
    mediaType: "image/svg+xml",
    extension: "svg",
    bytes: new TextEncoder().encode(sanitizeSvgFile(svg)),
  };
}

/** The text of an SVG document, or null when the bytes are not text with a root `svg`. */
function svgText(bytes: Uint8Array): string | null {
  let text: string;
  try {
    text = decodeBookBytes(bytes, "xml").text;
  } catch (error) {
    if (error instanceof BinaryDataError) return null;
    throw error;
  }
  let root;
  try {
    root = parseMarkup(text, { xmlMode: true }).children.find((node) => node.type === "tag");
  } catch {
    return null; // Nested past the bound: not an image anyone drew.
  }
  if (root === undefined || !("name" in root)) return null;
  return /^(?:[\w.-]+:)?svg$/i.test(root.name) ? text : null;
}

// An `img` in sanitised chapter html showing a resource, and its alt text (already escaped).
const IMAGE = /<img\s[^>]*?src="(res\/[A-Za-z0-9._-]+)"[^>]*>/g;
const ALT = /\salt="([^"]*)"/;

// A reference to a resource in sanitised chapter html: the attribute, its `res/…` path and an
// optional fragment. The sanitiser writes every attribute value in double quotes.
const REFERENCE = /\s([A-Za-z:-]+)="(res\/[A-Za-z0-9._-]+)(#[^"]*)?"/g;

/**
 * Give every resource of a book its real type (see the module doc): renamed to the extension of
 * that type, an SVG sanitised, anything else dropped with a warning; the chapters' references
 * follow: an image of a dropped file becomes its alt text (a broken image shows nothing), any
 * other reference to one loses its attribute.
 *
 * @param book an extracted book.
 * @returns the book with its resources vetted; the same object when it has none.
 */
export async function vetBookResources(book: ExtractedBook): Promise<ExtractedBook> {
  if (book.resources === undefined || book.resources.length === 0) return book;
  const kept: BookResource[] = [];
  const warnings: BookWarning[] = [];
  // Old path → new path, or null when dropped.
  const moved = new Map<string, string | null>();
  for (const resource of book.resources) {
    const vetted = await vetResource(resource.bytes);
    if (vetted === null) {
      moved.set(resource.path, null);
      warnings.push({
        kind: "resource_missing",
        message: `File "${resource.path}" (declared ${
          resource.mediaType || "with no media type"
        }) is not an image, audio, video or SVG file; it was left out`,
      });
      continue;
    }
    const path = withExtension(resource.path, vetted.extension);
    if (path !== resource.path) moved.set(resource.path, path);
    kept.push({ path, mediaType: vetted.mediaType, bytes: vetted.bytes });
  }
  const chapters = moved.size === 0 ? book.chapters : book.chapters.map((chapter) => ({
    ...chapter,
    html: chapter.html.replace(
      IMAGE,
      (image, path: string) => moved.get(path) === null ? (ALT.exec(image)?.[1] ?? "") : image,
    ).replace(REFERENCE, (match, name: string, path: string, fragment = "") => {
      if (!moved.has(path)) return match;
      const to = moved.get(path);
      return to === null || to === undefined ? "" : ` ${name}="${to}${fragment}"`;
    }),
  }));
  return {
    ...book,
    chapters,
    resources: kept,
    warnings: [...(book.warnings ?? []), ...warnings],
  };
}

/**
 * A `res/<k>-<name>` path with its extension replaced by `extension` (or added). The `<k>-`
 * prefix keeps two files that end up with the same name apart.
 */
function withExtension(path: string, extension: string): string {
  const slash = path.lastIndexOf("/");
  const name = path.slice(slash + 1);
  const dot = name.lastIndexOf(".");
  // `res/1-.png` keeps its `1-` stem rather than becoming a dot file.
  const stem = dot > name.indexOf("-") + 1 ? name.slice(0, dot) : name;
  const current = dot === -1 ? "" : name.slice(dot + 1).toLowerCase();
  if (current === extension || (current === "jpeg" && extension === "jpg")) return path;
  return `${path.slice(0, slash + 1)}${stem}.${extension}`;
}
