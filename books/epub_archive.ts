/**
 * An EPUB's ZIP archive as real books are zipped, and the XML and XHTML read from it, decoded by
 * `books/decode.ts`. Entry names are looked up the way a reading system finds them: backslashes are separators, a UTF-8 name stored without the ZIP's UTF-8 flag
 * is read as UTF-8, names compare after Unicode NFC normalisation, and case only when nothing
 * matches exactly. Sizes are bounded before anything is inflated (a ZIP bomb guard).
 *
 * @module
 */
import { type UnzipFileInfo, unzipSync } from "fflate";
import { decodeBookBytes } from "./decode.ts";

/** Largest unpacked size of one entry read from an EPUB, in bytes (64 MiB). */
export const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

/** Largest unpacked size of all entries read from one EPUB, in bytes (256 MiB). */
export const MAX_UNPACKED_BYTES = 256 * 1024 * 1024;

/** Builds the error for a broken archive; `reason` is lower case, values quoted. */
export type Fail = (reason: string, cause?: unknown) => Error;

/** An opened archive: its entries by canonical name, inflated on demand. */
export interface Archive {
  /**
   * The canonical name of the entry a path names (NFC, `/` separators), or `null` when there is
   * none; an exact match wins over one that differs only in case.
   */
  find(path: string): string | null;
  /** Unpack entries by canonical name (from `find`), in one pass over the archive. */
  unpack(names: Iterable<string>): Map<string, Uint8Array>;
  /** The unpacked size an entry declares, in bytes; 0 for a name that is not an entry. */
  size(name: string): number;
}

/**
 * Open a ZIP archive: read its central directory without inflating anything.
 *
 * @param bytes the file's bytes.
 * @param fail builds the error thrown.
 * @returns the archive.
 * @throws what `fail` builds when the bytes are not a ZIP archive (or it is truncated), when an
 *   entry to unpack is over `MAX_ENTRY_BYTES`, the entries unpacked so far are over
 *   `MAX_UNPACKED_BYTES`, or inflating fails.
 */
export function openArchive(bytes: Uint8Array, fail: Fail): Archive {
  /** canonical name → fflate's name (what its filter sees) and declared size. */
  const entries = new Map<string, { raw: string; size: number }>();
  const folded = new Map<string, string>();
  try {
    // A filter that takes nothing walks the central directory without inflating anything; a
    // truncated archive has lost its end-of-central-directory record and fails here.
    unzipSync(bytes, {
      filter: (file: UnzipFileInfo) => {
        const name = canonicalName(file.name);
        if (!entries.has(name)) entries.set(name, { raw: file.name, size: file.originalSize });
        const lower = name.toLowerCase();
        if (!folded.has(lower)) folded.set(lower, name);
        return false;
      },
    });
  } catch (error) {
    throw fail("the file is not a valid ZIP archive", error);
  }
  let unpacked = 0;
  return {
    find(path: string): string | null {
      const name = canonicalName(path);
      return entries.has(name) ? name : folded.get(name.toLowerCase()) ?? null;
    },
    size(name: string): number {
      return entries.get(name)?.size ?? 0;
    },
    unpack(names: Iterable<string>): Map<string, Uint8Array> {
      const wanted = new Map<string, string>();
      for (const name of names) {
        const entry = entries.get(name);
        if (entry === undefined || wanted.has(entry.raw)) continue;
        // fflate inflates into a buffer of the declared size and never grows it, so checking the
        // declared sizes bounds the memory even when an entry lies about its size.
        if (entry.size > MAX_ENTRY_BYTES) {
          throw fail(`"${name}" unpacks to more than "${MAX_ENTRY_BYTES}" bytes`);
        }
        unpacked += entry.size;
        wanted.set(entry.raw, name);
      }
      if (unpacked > MAX_UNPACKED_BYTES) {
        throw fail(`its files unpack to more than "${MAX_UNPACKED_BYTES}" bytes`);
      }
      if (wanted.size === 0) return new Map();
      let files: Record<string, Uint8Array>;
      try {
        files = unzipSync(bytes, { filter: (file) => wanted.has(file.name) });
      } catch (error) {
        throw fail(`the ZIP archive is damaged: ${errorMessage(error)}`, error);
      }
      const out = new Map<string, Uint8Array>();
      for (const [raw, name] of wanted) if (files[raw] !== undefined) out.set(name, files[raw]);
      return out;
    },
  };
}

/**
 * An entry name as hrefs are compared with it: backslashes as `/` (zipped on Windows), a UTF-8
 * name that fflate read as CP437/Latin-1 (no UTF-8 flag) decoded as UTF-8, NFC.
 */
function canonicalName(name: string): string {
  let fixed = name;
  // fflate maps each byte of a flagless name to one char; bytes that form valid UTF-8 (and are
  // not plain ASCII) were almost surely written as UTF-8 by a zipper that forgot the flag.
  if (/[\x80-\xff]/.test(name) && [...name].every((char) => char.charCodeAt(0) <= 0xff)) {
    const raw = Uint8Array.from(name, (char) => char.charCodeAt(0));
    try {
      fixed = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    } catch {
      // Not UTF-8: a legacy code page; keep fflate's reading.
    }
  }
  return fixed.replaceAll("\\", "/").replace(/^\/+/, "").normalize("NFC");
}

/**
 * Decode an XML or XHTML file of the archive. The decoding is `books/decode.ts`'s, as for every
 * text format: a byte-order mark, then the XML prolog's `encoding` (also in
 * UTF-16 without a mark) or, for XHTML, a `<meta charset>`, else UTF-8, else a detected encoding.
 * Bytes not valid in the declared encoding are read as UTF-8 or as detected, never refused.
 *
 * @param bytes the file's bytes.
 * @param name the file's archive path, named in the warning.
 * @param kind `"html"` for a content or navigation document (a `<meta charset>` counts), `"xml"`
 *   for the package document, the NCX and SVG.
 * @param warn receives the warning when the encoding was guessed: `"<name>": encoding guessed as
 *   "<encoding>" (<why>)`.
 * @returns the text, a leading byte-order mark removed.
 * @throws BinaryDataError when the file is binary data, not text (see `books/decode.ts`).
 */
export function decodeEntry(
  bytes: Uint8Array,
  name: string,
  kind: "xml" | "html",
  warn: (message: string) => void,
): string {
  const decoded = decodeBookBytes(bytes, kind);
  if (decoded.warning !== null) warn(`"${name}": ${decoded.warning}`);
  return decoded.text;
}

/** An error's message alone (a thrown non-Error as text), for a damaged-archive reason. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
