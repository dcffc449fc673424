/**
 * Books that come packed, as Project Gutenberg mirrors hand them out: a `.zip` holding one text,
 * Markdown or HTML book (`1342-0.zip` → `1342-0.txt`; `1342-h.zip` → `1342-h/1342-h.htm` with its
 * `images/`), and a gzip'd file read by the extension under `.gz` (`x.txt.gz` → text). What comes
 * out is the inner file's bytes and a path naming it inside the archive, which the format readers
 * then read exactly as they read that file on disk.
 *
 * Bounds, checked before or while anything is inflated, so a hostile archive fails at once and
 * never holds more than the bound in memory: the EPUB reader's per-entry and total sizes
 * (`books/epub_archive.ts`), an entry count, a compression ratio, and the unpacked size of a gzip
 * file. Every failure is an `UnreadableBookError`: the same archive fails the same way each time.
 *
 * @module
 */
import { Gunzip } from "fflate";
import { basename, extname } from "node:path";
import { crc32 } from "node:zlib";
import {
  type ArchiveFormat,
  type BookFormat,
  describeParseError,
  fileStem,
  FORMATS,
  unreadableBook,
  UnreadableBookError,
} from "./book.ts";
import { MAX_ENTRY_BYTES, MAX_UNPACKED_BYTES } from "./epub_archive.ts";
import {
  type Fail,
  INFLATE_CHUNK,
  quoteName,
  readZipDirectory,
  unpackEntry,
  type ZipEntry,
} from "./zip_directory.ts";

/**
 * Most entries a book's ZIP may list: a Gutenberg HTML book's is its page and a few hundred
 * images.
 */
export const MAX_ARCHIVE_ENTRIES = 10_000;

/**
 * Highest unpacked-to-packed size ratio accepted for anything over {@linkcode RATIO_FLOOR_BYTES}.
 * Book text deflates about 3:1 and HTML about 4:1; deflate itself stops near 1032:1, where a bomb
 * lives.
 */
export const MAX_COMPRESSION_RATIO = 100;

/** Unpacked size, bytes (1 MiB), below which the ratio is not checked: a small file is harmless. */
export const RATIO_FLOOR_BYTES = 1024 * 1024;

/** Largest unpacked gzip file, bytes: one book file, bounded as one entry of an archive is. */
export const MAX_GUNZIP_BYTES = MAX_ENTRY_BYTES;

/**
 * Most members a gzip file may hold (RFC 1952 section 2.2: members one after another read as one
 * file). A book is one member, or a few `cat`ed together; fflate sets up a 32 KiB window for each,
 * so a file of thousands of empty 20-byte members costs seconds of CPU without unpacking a byte.
 */
export const MAX_GZIP_MEMBERS = 1_000;

/** How many times bigger than every other book file the largest must be to be the main one. */
const CLEAR_LEAD = 10;

/** Names listed in a message about what an archive holds. */
const NAMES_LISTED = 5;

/** The book file inside an archive. */
export interface PackedBook {
  /** The format the inner file's extension names. */
  format: BookFormat;
  /** The archive's path, `/`, the inner file's name (`books/1342-h.zip/1342-h/1342-h.htm`). */
  path: string;
  bytes: Uint8Array;
}

/**
 * Take the book file out of an archive.
 *
 * A ZIP's book is its one text, Markdown or HTML file; with several, the one named like the
 * archive (`1342-h.zip` → `…/1342-h.htm`), else the largest when it is ten times the size of every
 * other; anything else (images, CSS, a macOS `._` fork) is left packed. A gzip file holds the
 * file its name has under `.gz`.
 *
 * @param kind `zip` or `gzip`, as the extension named it.
 * @param bytes the archive file's bytes.
 * @param path its path, for messages and as the directory of the inner file's path.
 * @returns the inner book file.
 * @throws UnreadableBookError when it is not a valid archive (truncated, damaged, encrypted), is
 *   over a bound (`MAX_ARCHIVE_ENTRIES`, `MAX_ENTRY_BYTES`, `MAX_UNPACKED_BYTES`,
 *   `MAX_COMPRESSION_RATIO`, `MAX_GUNZIP_BYTES`), holds no book file, or several with no main one;
 *   for gzip, when its name does not say a book format under `.gz`.
 */
export function unpackBook(kind: ArchiveFormat, bytes: Uint8Array, path: string): PackedBook {
  const fail: Fail = (reason, cause) => unreadableBook(kind, path, reason, cause);
  try {
    return kind === "zip" ? unpackZip(bytes, path, fail) : gunzipBook(bytes, path, fail);
  } catch (error) {
    if (error instanceof UnreadableBookError) throw error;
    throw fail(`the archive could not be read: ${describeParseError(error)}`, error);
  }
}

function unpackZip(bytes: Uint8Array, path: string, fail: Fail): PackedBook {
  const entries = readZipDirectory(bytes, MAX_ARCHIVE_ENTRIES, fail);
  const total = entries.reduce((sum, entry) => sum + entry.size, 0);
  if (total > MAX_UNPACKED_BYTES) {
    throw fail(`its files unpack to more than "${MAX_UNPACKED_BYTES}" bytes`);
  }
  // `._name`: a macOS resource fork (AppleDouble), in place or under `__MACOSX/`, not a file.
  const files = entries.filter((entry) =>
    !entry.name.endsWith("/") && !basename(entry.name).startsWith("._")
  );
  const books = files.filter((entry) => bookFormat(entry.name) !== undefined);
  // Two entries of one name are one file to every unzip tool, which keeps one of them; which one
  // differs from tool to tool (the Android "Master Key" signature bypass), so no book is picked.
  const seen = new Set<string>();
  for (const entry of books) {
    if (seen.has(entry.name)) throw fail(`it holds two files named ${quoteName(entry.name)}`);
    seen.add(entry.name);
  }
  const main = mainBook(books, path);
  if (main === null) {
    if (books.length === 0) {
      throw fail(
        files.length === 0
          ? "it holds no files"
          : `it holds no text, Markdown or HTML file, only ${listNames(files)}`,
      );
    }
    throw fail(
      `it holds several books and none is the main one (named like the archive, or ${CLEAR_LEAD} times the size of the rest): ${
        listNames(books)
      }`,
    );
  }
  if (main.size > MAX_ENTRY_BYTES) {
    throw fail(`${quoteName(main.name)} unpacks to more than "${MAX_ENTRY_BYTES}" bytes`);
  }
  if (main.size > RATIO_FLOOR_BYTES && main.size > main.compressedSize * MAX_COMPRESSION_RATIO) {
    throw fail(
      `${
        quoteName(main.name)
      } is compressed more than ${MAX_COMPRESSION_RATIO} to 1 (a ZIP bomb, not a book)`,
    );
  }
  return {
    format: bookFormat(main.name)!,
    path: `${path}/${main.name}`,
    bytes: unpackEntry(bytes, main, fail),
  };
}

/** The main book among an archive's book files, or `null` when there is no clear one. */
function mainBook(books: readonly ZipEntry[], path: string): ZipEntry | null {
  if (books.length <= 1) return books[0] ?? null;
  const stem = fileStem(path).toLowerCase();
  const named = books.filter((entry) => fileStem(entry.name).toLowerCase() === stem);
  if (named.length === 1) return named[0];
  const [largest, next] = [...books].sort((a, b) => b.size - a.size);
  return largest.size >= next.size * CLEAR_LEAD ? largest : null;
}

function gunzipBook(bytes: Uint8Array, path: string, fail: Fail): PackedBook {
  const inner = path.replace(/\.gz$/i, "");
  const format = bookFormat(inner);
  if (format === undefined) {
    const extension = extname(inner).toLowerCase();
    const known = [...FORMATS].filter(([, packed]) => packed !== "epub")
      .map(([ext]) => `${ext}.gz`).join(", ");
    throw fail(
      extension === ""
        ? `its name does not say what it holds, expected one of ${known}`
        : `it holds a "${extension}" file, expected one of ${known}`,
    );
  }
  if (bytes.length === 0) throw fail("the file is empty");
  const chunks: Uint8Array[] = [];
  let total = 0;
  /** Input bytes handed to the inflater so far: the ratio is of what came out of them. */
  let pushed = 0;
  let ended = false;
  let over: string | null = null;
  // Each member ends in the CRC-32 and length (mod 2^32) of what it unpacks to (RFC 1952 2.3.1);
  // fflate checks neither, so a corrupt or cut-off file would otherwise be read as it came.
  let members = 1;
  let memberCrc = 0;
  let memberSize = 0;
  const checkMember = (end: number): void => {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (
      end < 8 || end > bytes.length || view.getUint32(end - 8, true) !== memberCrc ||
      view.getUint32(end - 4, true) !== memberSize
    ) {
      over = members === 1 && end === bytes.length
        ? "the gzip data is damaged or truncated: it fails its CRC-32 or length check"
        : `the gzip data is damaged or truncated: member "${members}" fails its CRC-32 or length check`;
      throw new RangeError(over);
    }
    memberCrc = 0;
    memberSize = 0;
  };
  const gunzip = new Gunzip((chunk, final) => {
    total += chunk.length;
    if (total > MAX_GUNZIP_BYTES) {
      over = `it unpacks to more than "${MAX_GUNZIP_BYTES}" bytes`;
    } else if (total > RATIO_FLOOR_BYTES && total > pushed * MAX_COMPRESSION_RATIO) {
      over = `it is compressed more than ${MAX_COMPRESSION_RATIO} to 1 (a gzip bomb, not a book)`;
    }
    if (over !== null) throw new RangeError(over);
    chunks.push(chunk);
    memberCrc = crc32(chunk, memberCrc);
    memberSize = (memberSize + chunk.length) >>> 0;
    ended ||= final;
  });
  // Called with where the next member starts, once the one before has unpacked in full.
  gunzip.onmember = (start) => {
    checkMember(start);
    if (++members > MAX_GZIP_MEMBERS) {
      over = `it holds more than "${MAX_GZIP_MEMBERS}" gzip members`;
      throw new RangeError(over);
    }
  };
  try {
    // In slices, so each expands at most ~1032× before the bounds above see it.
    for (let from = 0; from < bytes.length; from += INFLATE_CHUNK) {
      pushed = Math.min(from + INFLATE_CHUNK, bytes.length);
      gunzip.push(bytes.subarray(from, pushed), pushed === bytes.length);
    }
    if (ended) checkMember(bytes.length);
  } catch (error) {
    if (over !== null) throw fail(over);
    throw fail(`the gzip data is damaged: ${describeParseError(error)}`, error);
  }
  if (!ended) throw fail("the gzip data is truncated");
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return { format, path: inner, bytes: out };
}

/** The format a packed file's extension names; EPUB is its own archive and is not unpacked. */
function bookFormat(name: string): Exclude<BookFormat, "epub"> | undefined {
  const format = FORMATS.get(extname(name).toLowerCase());
  return format === "epub" ? undefined : format;
}

function listNames(entries: readonly ZipEntry[]): string {
  const shown = entries.slice(0, NAMES_LISTED).map((entry) => quoteName(entry.name)).join(", ");
  const more = entries.length - NAMES_LISTED;
  return more > 0 ? `${shown} and ${more} more` : shown;
}
