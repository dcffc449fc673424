/**
 * A ZIP archive's central directory, read without inflating anything, and one entry inflated with
 * its output counted as it comes: the reading under `books/book_archive.ts`. The layout is PKWARE's
 * APPNOTE (sections 4.3.7 local header, 4.3.12 central directory header, 4.3.16 end of central
 * directory, 4.3.14–15 and 4.5.3 for ZIP64).
 *
 * @module
 */
import { Inflate } from "fflate";
import { crc32 } from "node:zlib";
import { errorMessage } from "./epub_archive.ts";

/** Builds the error for a broken archive; `reason` is lower case, values quoted. */
export type Fail = (reason: string, cause?: unknown) => Error;

/** One entry as the central directory describes it. */
export interface ZipEntry {
  /** The stored name, `/` separators (backslashes turned), no leading `/`. */
  name: string;
  /** Compression method: 0 stored, 8 deflated (the only two read). */
  method: number;
  /** General-purpose flags; bit 0 means encrypted. */
  flags: number;
  /** Bytes the entry occupies in the archive. */
  compressedSize: number;
  /** Bytes it declares it unpacks to. */
  size: number;
  /** CRC-32 of the unpacked bytes. */
  crc: number;
  /** Where its local header starts. */
  localOffset: number;
}

const EOCD = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_EOCD = 0x06064b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
/**
 * Input handed to the inflater at a time, bytes (4 KiB): deflate expands it at most ~1032× (to
 * ~4 MiB) before the output is counted.
 */
export const INFLATE_CHUNK = 4 * 1024;

/**
 * Read the central directory of a ZIP archive.
 *
 * @param bytes the whole archive.
 * @param maxEntries the most entries accepted.
 * @param fail builds the error thrown.
 * @returns the entries in directory order (directories included, names ending in `/`).
 * @throws what `fail` builds when there is no end-of-central-directory record (not a ZIP, or a
 *   truncated one), the directory lies outside the file, or it lists more than `maxEntries`.
 */
export function readZipDirectory(bytes: Uint8Array, maxEntries: number, fail: Fail): ZipEntry[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u16 = (at: number) => view.getUint16(at, true);
  const u32 = (at: number) => view.getUint32(at, true);
  const u64 = (at: number) => Number(view.getBigUint64(at, true));
  const end = findEndRecord(bytes, view);
  if (end < 0) throw fail("the file is not a valid ZIP archive (no central directory)");
  try {
    let count = u16(end + 10);
    let offset = u32(end + 16);
    /** Bytes before the archive proper (a self-extractor's stub), which its offsets leave out. */
    let prefix = 0;
    if (
      (count === 0xffff || offset === 0xffffffff) && end >= 20 && u32(end - 20) === ZIP64_LOCATOR
    ) {
      const at = u64(end - 12);
      if (u32(at) !== ZIP64_EOCD) throw new RangeError("bad ZIP64 record");
      count = u64(at + 32);
      offset = u64(at + 48);
    } else if (offset + u32(end + 12) !== end) {
      // The directory ends where the end record starts: `cat stub.exe book.zip` shifts both by
      // the stub's length, and Info-ZIP unzip and Python's zipfile read the archive so shifted.
      const shifted = end - u32(end + 12);
      if (shifted > offset && u32(shifted) === CENTRAL) {
        prefix = shifted - offset;
        offset = shifted;
      }
    }
    if (count > maxEntries) {
      throw fail(`it holds "${count}" entries, more than "${maxEntries}"`);
    }
    const entries: ZipEntry[] = [];
    for (let i = 0; i < count; i++) {
      if (u32(offset) !== CENTRAL) throw new RangeError(`entry ${i + 1} is not where it should be`);
      const flags = u16(offset + 8);
      const nameLength = u16(offset + 28);
      const extraLength = u16(offset + 30);
      const next = offset + 46 + nameLength + extraLength + u16(offset + 32);
      if (next > end) throw new RangeError(`entry ${i + 1} runs past the end of the directory`);
      const entry: ZipEntry = {
        name: entryName(bytes.subarray(offset + 46, offset + 46 + nameLength), flags),
        method: u16(offset + 10),
        flags,
        crc: u32(offset + 16),
        compressedSize: u32(offset + 20),
        size: u32(offset + 24),
        localOffset: u32(offset + 42),
      };
      readZip64Extra(view, offset + 46 + nameLength, extraLength, entry);
      entry.localOffset += prefix;
      entries.push(entry);
      offset = next;
    }
    return entries;
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw fail(`the ZIP archive is damaged: ${error.message}`, error);
  }
}

/**
 * Where the end-of-central-directory record starts, or -1. It is 22 bytes and a comment of at most
 * 65535 that ends the file; since a comment may itself hold the record's signature, the record
 * whose comment ends exactly at the end of the file wins, else the last whose comment fits in it
 * (an archive with bytes after it, as Info-ZIP unzip reads one).
 */
function findEndRecord(bytes: Uint8Array, view: DataView): number {
  let fits = -1;
  for (let at = bytes.length - 22; at >= 0 && at >= bytes.length - 22 - 0xffff; at--) {
    if (view.getUint32(at, true) !== EOCD) continue;
    const commentEnd = at + 22 + view.getUint16(at + 20, true);
    if (commentEnd === bytes.length) return at;
    if (fits < 0 && commentEnd < bytes.length) fits = at;
  }
  return fits;
}

/** Sizes and offset too big for 32 bits are 0xffffffff here and 64-bit in extra field 0x0001. */
function readZip64Extra(view: DataView, at: number, length: number, entry: ZipEntry): void {
  for (let field = at; field + 4 <= at + length;) {
    const id = view.getUint16(field, true);
    const size = view.getUint16(field + 2, true);
    if (id === 0x0001) {
      let next = field + 4;
      const take = (): number => {
        const value = Number(view.getBigUint64(next, true));
        next += 8;
        return value;
      };
      if (entry.size === 0xffffffff) entry.size = take();
      if (entry.compressedSize === 0xffffffff) entry.compressedSize = take();
      if (entry.localOffset === 0xffffffff) entry.localOffset = take();
      return;
    }
    field += 4 + size;
  }
}

/**
 * A stored name: UTF-8 when flagged (bit 11) or valid as UTF-8, else Latin-1; `\` as `/`; a control
 * character (U+0000–U+001F, U+007F: never in a real file name) as U+FFFD, so no NUL or line break
 * reaches a message, a path or the database through it.
 */
function entryName(raw: Uint8Array, flags: number): string {
  let name: string;
  try {
    name = new TextDecoder("utf-8", { fatal: (flags & 0x800) === 0 }).decode(raw);
  } catch {
    name = new TextDecoder("latin1").decode(raw);
  }
  // deno-lint-ignore no-control-regex
  return name.replace(/[\u0000-\u001f\u007f]/g, "\uFFFD").replaceAll("\\", "/").replace(/^\/+/, "")
    .normalize("NFC");
}

/** Names quoted in a message are cut to this many characters. */
const NAME_SHOWN = 100;

/** An entry's name as a message quotes it: in double quotes, cut to `NAME_SHOWN` characters. */
export function quoteName(name: string): string {
  return `"${name.length > NAME_SHOWN ? `${name.slice(0, NAME_SHOWN)}…` : name}"`;
}

/**
 * Unpack one entry, never holding more than it declares: inflation stops the moment its output
 * passes `entry.size`, and the result must match the entry's CRC-32.
 *
 * @param bytes the whole archive.
 * @param entry an entry from {@linkcode readZipDirectory}, its size already bounded by the caller.
 * @param fail builds the error thrown.
 * @returns its bytes.
 * @throws what `fail` builds when it is encrypted, uses a method other than stored or deflated, its
 *   data lies outside the file, is not valid deflate data, unpacks to more or fewer bytes than it
 *   declares, or fails its CRC check.
 */
export function unpackEntry(bytes: Uint8Array, entry: ZipEntry, fail: Fail): Uint8Array {
  const quoted = quoteName(entry.name);
  if ((entry.flags & 1) !== 0) throw fail(`${quoted} is encrypted`);
  if (entry.method !== 0 && entry.method !== 8) {
    throw fail(`${quoted} uses compression method "${entry.method}", not stored or deflated`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const at = entry.localOffset;
  if (at + 30 > bytes.length || view.getUint32(at, true) !== LOCAL) {
    throw fail(`the ZIP archive is damaged: ${quoted} is not where its directory says`);
  }
  const start = at + 30 + view.getUint16(at + 26, true) + view.getUint16(at + 28, true);
  if (start + entry.compressedSize > bytes.length) {
    throw fail(`the ZIP archive is damaged: ${quoted} runs past the end of the file`);
  }
  const data = bytes.subarray(start, start + entry.compressedSize);
  let out: Uint8Array;
  if (entry.method === 0) {
    out = data;
  } else {
    out = new Uint8Array(entry.size);
    let filled = 0;
    let ended = false;
    let overflow = false;
    const inflater = new Inflate((chunk, final) => {
      if (filled + chunk.length > entry.size) {
        overflow = true;
        throw new RangeError("overflow");
      }
      out.set(chunk, filled);
      filled += chunk.length;
      ended ||= final;
    });
    try {
      for (let from = 0; from < data.length && !ended; from += INFLATE_CHUNK) {
        const to = Math.min(from + INFLATE_CHUNK, data.length);
        inflater.push(data.subarray(from, to), to === data.length);
      }
      if (data.length === 0) inflater.push(data, true);
    } catch (error) {
      if (overflow) {
        throw fail(`${quoted} unpacks to more than the "${entry.size}" bytes it declares`);
      }
      throw fail(`the ZIP archive is damaged: ${quoted}: ${errorMessage(error)}`, error);
    }
    if (filled !== entry.size) {
      throw fail(`the ZIP archive is damaged: ${quoted} unpacks to fewer bytes than it declares`);
    }
  }
  if (out.length !== entry.size || crc32(out) !== entry.crc) {
    throw fail(`the ZIP archive is damaged: ${quoted} fails its CRC check`);
  }
  return out;
}
