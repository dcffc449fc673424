/**
 * `extractBook()` on packed books, as Project Gutenberg mirrors hand them out: a `.zip` holding one
 * text or HTML book (with its images), and a `.txt.gz` / `.html.gz`. The property: the packed book
 * gives exactly the book the file itself gives. Hostile archives (bombs, damage, no book, two
 * books) are each a prompt `UnreadableBookError`, and the next book still extracts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { gunzipSync, gzipSync, strToU8, type Zippable, zipSync } from "fflate";
import { extractBook, type ExtractedBook, UnreadableBookError } from "../../books/extract.ts";
import { tooBig } from "../../books/extract_process.ts";
import { PNG } from "../_epub.ts";

const FIXTURES = new URL("../fixtures/books/", import.meta.url).pathname;
const signal = new AbortController().signal;

async function fixture(name: string): Promise<Uint8Array> {
  return gunzipSync(await Deno.readFile(join(FIXTURES, name)));
}

/** Write files (path → bytes) into a fresh directory, run `body` on it, remove it. */
async function inDir<T>(
  files: Record<string, Uint8Array>,
  body: (dir: string) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "extract_archive_test_" });
  try {
    for (const [name, bytes] of Object.entries(files)) {
      await Deno.mkdir(dirname(join(dir, name)), { recursive: true });
      await Deno.writeFile(join(dir, name), bytes);
    }
    return await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function extractFile(name: string, bytes: Uint8Array): Promise<ExtractedBook> {
  return await inDir({ [name]: bytes }, (dir) => extractBook(join(dir, name), signal));
}

/** What a reader sees of a book: everything but the warnings, which quote the file's path. */
function shown(book: ExtractedBook) {
  const { warnings: _warnings, ...rest } = book;
  return rest;
}

/** The regression set's text, HTML and Markdown books (`tests/fixtures/books/*.gz`). */
const PACKED_BOOKS = [...Deno.readDirSync(FIXTURES)].map((entry) => entry.name)
  .filter((name) => name.endsWith(".gz")).sort();

Deno.test("extractBook() reads a Gutenberg NNNN-0.zip as the book it holds, for every text, HTML and Markdown book of the regression set", async () => {
  assert.ok(PACKED_BOOKS.length >= 10, `${PACKED_BOOKS.length} books`);
  for (const name of PACKED_BOOKS) {
    const inner = name.replace(/\.gz$/, "").replace(/^[^.]+/, "11-0");
    const bytes = await fixture(name);
    const alone = await extractFile(inner, bytes);
    const zipped = await extractFile("11-0.zip", zipSync({ [inner]: bytes }));
    assert.ok(alone.chapters.length > 1, name);
    assert.deepEqual(shown(zipped), shown(alone), name);
  }
});

Deno.test("extractBook() reads a .txt.gz, .html.gz or .md.gz as the file under the .gz, for every such book of the regression set", async () => {
  for (const name of PACKED_BOOKS) {
    const packed = await Deno.readFile(join(FIXTURES, name));
    const inner = name.replace(/\.gz$/, "");
    const alone = await extractFile(inner, gunzipSync(packed));
    const gunzipped = await extractFile(name, packed);
    assert.ok(alone.chapters.length > 1, name);
    assert.deepEqual(shown(gunzipped), shown(alone), name);
  }
  // gzip(1) reads concatenated members as one file (RFC 1952 section 2.2); so does the reader.
  const text = await fixture("alice.txt.gz");
  const half = text.length >> 1;
  const members = [gzipSync(text.subarray(0, half)), gzipSync(text.subarray(half))];
  const joined = new Uint8Array(members[0].length + members[1].length);
  joined.set(members[0]);
  joined.set(members[1], members[0].length);
  assert.deepEqual(
    shown(await extractFile("alice.txt.gz", joined)),
    shown(await extractFile("alice.txt", text)),
  );
});

Deno.test("extractBook() reads a Gutenberg NNNN-h.zip (page and images, zipped by zip(1)) as the page beside its images", async () => {
  const html = await fixture("pride-and-prejudice.html.gz");
  const files = { "1342-h/1342-h.htm": html, "1342-h/images/cover.jpg": PNG };
  const alone = await inDir(files, (dir) => extractBook(join(dir, "1342-h/1342-h.htm"), signal));
  const zipped = await inDir(files, async (dir) => {
    const zip = new Deno.Command("zip", { args: ["-q", "-r", "1342-h.zip", "1342-h"], cwd: dir });
    assert.equal((await zip.output()).code, 0);
    return await extractBook(join(dir, "1342-h.zip"), signal);
  });
  assert.ok(alone.chapters.length > 10);
  assert.ok(alone.chapters.some((chapter) => chapter.html.includes('src="images/cover.jpg"')));
  assert.equal(zipped.format, "html");
  assert.deepEqual(shown(zipped), shown(alone));
});

Deno.test("extractBook() picks a zip's main book: the one named like the zip, else one ten times the rest", async () => {
  const alice = await fixture("alice.txt.gz");
  const jekyll = await fixture("jekyll-and-hyde.txt.gz");
  const readme = strToU8("This file was downloaded from a mirror.\n");
  const expected = shown(await extractFile("11.txt", alice));
  const named = await extractFile("11.zip", zipSync({ "11.txt": alice, "43.txt": jekyll }));
  assert.deepEqual(shown(named), expected);
  const largest = await extractFile("book.zip", zipSync({ "README.txt": readme, "11.txt": alice }));
  assert.deepEqual(shown(largest), expected);
});

Deno.test("extractBook() passes over a zip's macOS resource forks (._name, __MACOSX/)", async () => {
  const story = strToU8("A Short Story\n\nCHAPTER I\n\nIt was short.\n\nCHAPTER II\n\nIt ended.\n");
  // AppleDouble: magic 0x00051607, then binary; bigger than the story, as a fork often is.
  const fork = new Uint8Array(4096);
  fork.set([0x00, 0x05, 0x16, 0x07]);
  const expected = shown(await extractFile("story.txt", story));
  const zip = zipSync({ "story/story.txt": story, "__MACOSX/story/._story.txt": fork });
  assert.deepEqual(shown(await extractFile("book.zip", zip)), expected);
});

/** A zip with a field of every central directory header set: 32 bits, or 16 with `bits`. */
function patchDirectory(zip: Uint8Array, field: number, value: number, bits = 32): Uint8Array {
  const out = zip.slice();
  const view = new DataView(out.buffer);
  for (let at = 0; at + 46 <= out.length; at++) {
    if (view.getUint32(at, true) !== 0x02014b50) continue;
    if (bits === 32) view.setUint32(at + field, value, true);
    else view.setUint16(at + field, value, true);
  }
  return out;
}

/** A zip's central directory with every entry's declared unpacked size set to `size`. */
function declareSize(zip: Uint8Array, size: number): Uint8Array {
  return patchDirectory(zip, 24, size);
}

/** Extract a hostile file: it must be refused, fast, with `reason`, and a book after it still read. */
async function assertRefused(name: string, bytes: Uint8Array, reason: RegExp): Promise<number> {
  const started = performance.now();
  await assert.rejects(extractFile(name, bytes), (error: unknown) => {
    assert.ok(error instanceof UnreadableBookError, String(error));
    assert.match(error.message, reason);
    return true;
  });
  const elapsed = performance.now() - started;
  assert.ok(elapsed < 5_000, `${name} took ${elapsed} ms`);
  const next = await extractFile("next.txt", strToU8("Next\n\nCHAPTER I\n\nIt still works.\n"));
  assert.deepEqual(next.chapters, [{ title: "CHAPTER I", html: "<p>It still works.</p>" }]);
  return elapsed;
}

Deno.test("extractBook() refuses a zip bomb: an entry compressed over 100 to 1", async () => {
  const zeros = new Uint8Array(32 * 1024 * 1024).fill(0x61);
  const bomb = zipSync({ "bomb.txt": zeros }, { level: 9 });
  await assertRefused(
    "bomb.zip",
    bomb,
    /^Cannot read ZIP archive ".*bomb\.zip": "bomb\.txt" is compressed more than 100 to 1/,
  );
});

Deno.test("extractBook() refuses a zip whose entry declares more than 64 MiB, or whose entries add up to more than 256 MiB", async () => {
  const text = await fixture("alice.txt.gz");
  await assertRefused(
    "big.zip",
    declareSize(zipSync({ "big.txt": text }, { level: 0 }), 65 * 1024 * 1024),
    /"big\.txt" unpacks to more than "67108864" bytes/,
  );
  const many: Zippable = {};
  for (let i = 0; i < 5; i++) many[`images/${i}.png`] = PNG;
  many["book.txt"] = text;
  await assertRefused(
    "many.zip",
    declareSize(zipSync(many, { level: 0 }), 60 * 1024 * 1024),
    /its files unpack to more than "268435456" bytes/,
  );
});

Deno.test("extractBook() refuses a zip entry that inflates past the size it declares", async () => {
  const text = await fixture("alice.txt.gz");
  const lying = declareSize(zipSync({ "alice.txt": text }), 1000);
  await assertRefused(
    "lying.zip",
    lying,
    /"alice\.txt" unpacks to more than the "1000" bytes it declares/,
  );
});

Deno.test("extractBook() refuses a zip listing more than 10000 entries", async () => {
  const files: Zippable = { "book.txt": strToU8("Book\n\nCHAPTER I\n\nText.\n") };
  for (let i = 0; i < 10_001; i++) files[`f/${i}`] = new Uint8Array();
  await assertRefused("crowded.zip", zipSync(files), /it holds "10002" entries, more than "10000"/);
});

Deno.test("extractBook() refuses a gzip bomb: over 100 to 1, or over 64 MiB unpacked", async () => {
  const bomb = gzipSync(new Uint8Array(64 * 1024 * 1024), { level: 9 });
  await assertRefused(
    "bomb.txt.gz",
    bomb,
    /^Cannot read gzip file ".*bomb\.txt\.gz": it is compressed more than 100 to 1/,
  );
  // The ratio is of the bytes inflated so far: incompressible bytes after a bomb do not hide it.
  const padding = new Uint8Array(1024 * 1024);
  for (let at = 0; at < padding.length; at += 65536) {
    crypto.getRandomValues(padding.subarray(at, at + 65536));
  }
  const head = gzipSync(new Uint8Array(66 * 1024 * 1024), { level: 9 });
  const tail = gzipSync(padding, { level: 0 });
  const padded = new Uint8Array(head.length + tail.length);
  padded.set(head);
  padded.set(tail, head.length);
  await assertRefused("padded.txt.gz", padded, /it is compressed more than 100 to 1/);
  // 1 KiB of noise in every 40 KiB: about 30 to 1, so only the size bound stops it.
  const big = new Uint8Array(65 * 1024 * 1024);
  for (let at = 0; at < big.length; at += 40 * 1024) {
    crypto.getRandomValues(big.subarray(at, at + 1024));
  }
  await assertRefused(
    "big.txt.gz",
    gzipSync(big, { level: 1 }),
    /it unpacks to more than "67108864" bytes/,
  );
});

Deno.test("extractBook() refuses a zip with no book in it, naming what it holds", async () => {
  const images = zipSync({ "images/cover.jpg": PNG, "images/i_001.jpg": PNG });
  await assertRefused(
    "images.zip",
    images,
    /it holds no text, Markdown or HTML file, only "images\/cover\.jpg", "images\/i_001\.jpg"/,
  );
  await assertRefused("empty.zip", zipSync({}), /it holds no files/);
});

Deno.test("extractBook() refuses a zip with two unrelated books and no main one, naming both", async () => {
  const two = zipSync({
    "alice.txt": await fixture("alice.txt.gz"),
    "jekyll.txt": await fixture("jekyll-and-hyde.txt.gz"),
  });
  await assertRefused(
    "two.zip",
    two,
    /several books and none is the main one.*"alice\.txt", "jekyll\.txt"/,
  );
});

Deno.test("extractBook() refuses an encrypted zip entry, and one compressed by a method other than deflate", async () => {
  const zip = zipSync({ "alice.txt": await fixture("alice.txt.gz") });
  await assertRefused("locked.zip", patchDirectory(zip, 8, 1, 16), /"alice\.txt" is encrypted/);
  await assertRefused(
    "bzip2.zip",
    patchDirectory(zip, 10, 12, 16),
    /"alice\.txt" uses compression method "12", not stored or deflated/,
  );
});

Deno.test("extractBook()'s child names a packed book's archive in its errors: a ZIP archive, a gzip file", () => {
  assert.match(
    tooBig("books/11.zip", 200 * 1024 * 1024).message,
    /^Cannot read ZIP archive "books\/11\.zip"/,
  );
  assert.match(tooBig("books/11.txt.gz", 200 * 1024 * 1024).message, /^Cannot read gzip file /);
});

Deno.test("extractBook() refuses a truncated or corrupt zip or gzip file", async () => {
  const text = await fixture("alice.txt.gz");
  const zip = zipSync({ "alice.txt": text });
  await assertRefused("cut.zip", zip.subarray(0, zip.length >> 1), /not a valid ZIP archive/);
  const corrupt = zip.slice();
  for (let at = 200; at < 400; at++) corrupt[at] ^= 0x5a;
  await assertRefused("corrupt.zip", corrupt, /the ZIP archive is damaged: "alice\.txt"/);
  const stored = zipSync({ "alice.txt": text }, { level: 0 });
  stored[1000] ^= 0x01;
  await assertRefused("flipped.zip", stored, /"alice\.txt" fails its CRC check/);
  const gz = gzipSync(text);
  await assertRefused(
    "cut.txt.gz",
    gz.subarray(0, gz.length >> 1),
    /gzip data is (truncated|damaged)/,
  );
  const bad = gz.slice();
  bad[0] = 0;
  await assertRefused("bad.txt.gz", bad, /the gzip data is damaged/);
  await assertRefused("what.gz", gzipSync(text), /its name does not say what it holds/);
  await assertRefused("book.tar.gz", gzipSync(text), /it holds a "\.tar" file/);
});

/** Byte arrays one after another, as `cat` joins files. */
function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

Deno.test("extractBook() refuses a gzip file whose CRC-32 or length trailer is wrong or cut off", async () => {
  const text = await fixture("alice.txt.gz");
  const gz = gzipSync(text);
  const damaged = /the gzip data is damaged or truncated: it fails its CRC-32 or length check/;
  for (
    const [name, bytes] of [
      ["crc.txt.gz", gz.slice()],
      ["length.txt.gz", gz.slice()],
      ["short.txt.gz", gz.subarray(0, gz.length - 4)],
      ["bare.txt.gz", gz.subarray(0, gz.length - 8)],
      ["tail.txt.gz", concat(gz, strToU8("abc"))],
    ] as const
  ) {
    if (name === "crc.txt.gz") bytes[bytes.length - 8] ^= 0xff;
    if (name === "length.txt.gz") bytes[bytes.length - 1] ^= 0xff;
    await assertRefused(name, bytes, damaged);
  }
  // A member before the last is checked too, before the next one is read.
  const half = text.length >> 1;
  const first = gzipSync(text.subarray(0, half));
  first[first.length - 5] ^= 0x01;
  await assertRefused(
    "members.txt.gz",
    concat(first, gzipSync(text.subarray(half))),
    /member "1" fails its CRC-32 or length check/,
  );
});

Deno.test("extractBook() refuses a gzip file of more than 1000 members, and reads one of 1000", async () => {
  const story = strToU8("A Short Story\n\nCHAPTER I\n\nIt was short.\n\nCHAPTER II\n\nIt ended.\n");
  const empty = gzipSync(new Uint8Array());
  const members = (count: number) =>
    concat(...Array.from({ length: count - 1 }, () => empty), gzipSync(story));
  const expected = shown(await extractFile("story.txt", story));
  assert.deepEqual(shown(await extractFile("story.txt.gz", members(1000))), expected);
  const elapsed = await assertRefused(
    "crowd.txt.gz",
    members(100_000),
    /it holds more than "1000" gzip members/,
  );
  assert.ok(elapsed < 1_000, `${elapsed} ms`);
});

const STORY = strToU8("A Short Story\n\nCHAPTER I\n\nIt was short.\n\nCHAPTER II\n\nIt ended.\n");

/** A zip written with no comment, given `comment`: its end record (the last 22 bytes) says so. */
function withComment(zip: Uint8Array, comment: Uint8Array): Uint8Array {
  const out = concat(zip, comment);
  new DataView(out.buffer).setUint16(zip.length - 2, comment.length, true);
  return out;
}

Deno.test("extractBook() finds a zip's end record past a comment that holds its signature, and past bytes after the archive", async () => {
  const expected = shown(await extractFile("story.txt", STORY));
  const zip = zipSync({ "story.txt": STORY });
  // "PK\x05\x06" in the comment: a record there, with no comment of its own, ends 18 bytes early.
  const comment = concat(strToU8("see PK\x05\x06 below"), new Uint8Array(30));
  assert.deepEqual(shown(await extractFile("note.zip", withComment(zip, comment))), expected);
  assert.deepEqual(
    shown(await extractFile("tail.zip", concat(zip, new Uint8Array(100)))),
    expected,
  );
});

Deno.test("extractBook() reads a zip behind a self-extractor's stub, its offsets not shifted", async () => {
  const stub = concat(strToU8("MZ"), new Uint8Array(5000).fill(0x90));
  const expected = shown(await extractFile("story.txt", STORY));
  const sfx = concat(stub, zipSync({ "story.txt": STORY }));
  assert.deepEqual(shown(await extractFile("sfx.zip", sfx)), expected);
});

Deno.test("extractBook() refuses a zip whose directory entry runs past the directory", async () => {
  // The last entry's name length, 60000: its name would take in the end record and beyond.
  const zip = patchDirectory(zipSync({ "story.txt": STORY }), 28, 60_000, 16);
  await assertRefused(
    "long.zip",
    zip,
    /the ZIP archive is damaged: entry 1 runs past the end of the directory/,
  );
});

Deno.test("extractBook() refuses a zip holding two book files of one name", async () => {
  const zip = zipSync({ "11.txt": STORY, "22.txt": await fixture("alice.txt.gz") });
  // The first entry renamed in both headers: two "22.txt", one 10 times the other.
  const renamed = zip.slice();
  const text = new TextDecoder("latin1").decode(renamed);
  for (let at = text.indexOf("11.txt"); at >= 0; at = text.indexOf("11.txt", at + 1)) {
    renamed.set(strToU8("22"), at);
  }
  await assertRefused("22.zip", renamed, /it holds two files named "22\.txt"/);
});

Deno.test("extractBook() quotes a zip's entry names with no control character and at most 100 characters", async () => {
  const files: Zippable = {};
  for (let i = 0; i < 3; i++) files[`${"a".repeat(60_000)}${i}.jpg`] = PNG;
  const long = await assertRefused(
    "long.zip",
    zipSync(files),
    /only "a{100}…", "a{100}…", "a{100}…"$/,
  );
  assert.ok(long < 5_000);
  // fflate writes a name as given: a NUL and a line break in it, which Postgres text refuses and
  // a log line splits on.
  const named = zipSync({ "cover\0\n.jpg": PNG });
  await assertRefused("nul.zip", named, /only "cover\uFFFD\uFFFD\.jpg"$/);
  const book = await extractFile("nul.zip", zipSync({ "story\0.txt": STORY }));
  assert.deepEqual(shown(book), shown(await extractFile("story.txt", STORY)));
});
