/**
 * `deno task fidelity`: the fidelity report on the regression set. Per book:
 * chapters found against expected (count, and titles equal), the share of the source's visible
 * words kept in the chapters, Project Gutenberg licence text left in, the licence kept with the
 * edition instead, internal links that land nowhere, title and author found,
 * warnings, and speed and memory: the first extraction's time and MB/s (of wall-clock and of CPU
 * time, as a worker that just started sees it), a second extraction's MB/s of CPU time (a warm
 * worker, as in a run of jobs) and the peak RSS (Linux `VmHWM`) of the first. Each book is
 * extracted in a child process of its own (`--one <path>`), so its peak RSS is that book's alone.
 *
 * `--large` adds the generated big books of `bench/_big_books.ts` (a 2,014-chapter ~10 MB EPUB, a
 * ~1 MB MathML EPUB, a ~10 MB novel as text, HTML and Markdown) and prints the speed and
 * memory targets beside them (≥ 5 MB/s for EPUB and text; ≤ 300 MB peak RSS for a 10 MB book).
 * `--only <text>` keeps the books whose file name contains it.
 *
 * Prints a table and exits 1 when a book misses a fidelity target (chapters exact, title/author,
 * ≥ 99 % kept, no licence). The speed and memory targets are printed, not judged in the exit code:
 * on a shared machine they measure the neighbours too.
 *
 * The source's visible words: see `bench/_visible_text.ts`. A word is a run of letters or digits;
 * the share kept counts each source word at most as often as the chapters (and their titles) and
 * the licence kept with the edition hold it.
 *
 * @module
 */
import process from "node:process";
import { join } from "node:path";
import { extractInProcess } from "../books/extract_in_process.ts";
import { htmlText } from "../books/sanitize.ts";
import { brokenLinks } from "./_book_links.ts";
import { type BigBook, bigBooks } from "./_big_books.ts";
import { layOut, readSet } from "./_regression_set.ts";
import { visibleSourceText } from "./_visible_text.ts";

/** What one child process reports for one book. */
interface Measure {
  chapters: string[];
  title: string;
  author: string | null;
  warnings: string[];
  /** Share of the source's visible words found in the chapters, 0…1. */
  kept: number;
  /** Chapters holding Project Gutenberg licence or frame text. */
  boilerplate: number;
  /** Internal links that name no chapter, resource or id of the book (`bench/_book_links.ts`). */
  brokenLinks: number;
  /** Characters of licence text kept with the edition (`ExtractedBook.licence`), 0 for none. */
  licenceChars: number;
  bytes: number;
  /** The first extraction: wall-clock and CPU time, ms. */
  wallMs: number;
  cpuMs: number;
  /** A second extraction in the same process, CPU time, ms. */
  warmCpuMs: number;
  /** Peak resident set of the child process over the first extraction, bytes. */
  peakRss: number;
}

/** A book to report on, with what it must come out as. */
interface Expected {
  file: string;
  title: string;
  author: string | null;
  /** Chapter titles in order, or only their number. */
  chapters: string[] | null;
  chapterCount: number;
  large: boolean;
}

/** The targets for big inputs. */
const MIN_MB_PER_S = 5;
const MAX_PEAK_RSS = 300 * 1024 * 1024;

const BOILERPLATE =
  /Project Gutenberg(?:-tm| Literary Archive| License)|(?:START|END) OF (?:THE|THIS) PROJECT GUTENBERG/i;

if (Deno.args[0] === "--one") {
  console.log(JSON.stringify(await measureOne(Deno.args[1])));
} else {
  const only = Deno.args.indexOf("--only");
  Deno.exit(
    await report(Deno.args.includes("--large"), only === -1 ? null : Deno.args[only + 1] ?? ""),
  );
}

async function report(large: boolean, only: string | null): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "fidelity_" });
  const rows: string[][] = [];
  const targets: string[] = [];
  let misses = 0;
  try {
    const books: Array<{ expected: Expected; write: () => Promise<string> }> = [];
    for (const book of await readSet()) {
      books.push({
        expected: { ...book, chapterCount: book.chapters.length, large: false },
        write: async () => (await layOut(book, dir)).path,
      });
    }
    for (const book of large ? bigBooks() : []) {
      books.push({ expected: { ...book, large: true }, write: () => writeBig(book, dir) });
    }
    for (const { expected, write } of books) {
      if (only !== null && !expected.file.includes(only)) continue;
      const path = await write();
      const measure = await measureInChild(path);
      await Deno.remove(path);
      const problems = judge(expected, measure);
      misses += problems.length === 0 ? 0 : 1;
      rows.push(row(expected, measure, problems));
      if (expected.large) targets.push(...judgeTargets(expected, measure));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  printTable([
    [
      "book",
      "MB",
      "chapters",
      "titles",
      "kept",
      "licence",
      "licence kept",
      "broken links",
      "title",
      "author",
      "1st ms",
      "MB/s",
      "MB/s cpu",
      "warm MB/s cpu",
      "peak RSS",
      "warnings / misses",
    ],
    ...rows,
  ]);
  console.log(`\n${rows.length - misses} of ${rows.length} books meet every fidelity target`);
  if (targets.length > 0) {
    console.log(
      `\nTargets for big books (load average ${
        (await Deno.readTextFile("/proc/loadavg")).split(" ")[0]
      } on ${navigator.hardwareConcurrency} cores; first extraction, wall clock):`,
    );
    for (const line of targets) console.log(`  ${line}`);
  }
  return misses === 0 ? 0 : 1;
}

async function writeBig(book: BigBook, dir: string): Promise<string> {
  const path = join(dir, book.file);
  await Deno.writeFile(path, book.bytes);
  return path;
}

function judge(book: Expected, measure: Measure): string[] {
  const problems: string[] = [];
  if (measure.chapters.length !== book.chapterCount) problems.push("chapter count");
  else if (book.chapters?.some((title, index) => title !== measure.chapters[index])) {
    problems.push("chapter titles");
  }
  if (measure.title !== book.title) problems.push(`title "${measure.title}"`);
  if (measure.author !== book.author) problems.push(`author "${measure.author}"`);
  if (measure.kept < 0.99) problems.push("text lost");
  // An EPUB's pages are the publisher's (tests/books/regression_set_test.ts): counted, not judged.
  if (measure.boilerplate > 0 && !book.file.endsWith(".epub")) problems.push("licence text");
  if (measure.brokenLinks > 0) problems.push("broken links");
  return problems;
}

/** The speed and memory targets, met or missed, for one big book. */
function judgeTargets(book: Expected, measure: Measure): string[] {
  const lines: string[] = [];
  const rate = measure.bytes / 1e6 / (measure.wallMs / 1000);
  if (/\.(epub|txt)$/.test(book.file)) {
    lines.push(
      `${book.file}: ${rate.toFixed(1)} MB/s (≥ ${MIN_MB_PER_S}) ${
        rate >= MIN_MB_PER_S ? "met" : "MISSED"
      }`,
    );
  }
  if (measure.bytes >= 5e6) {
    const mib = measure.peakRss / 1024 / 1024;
    lines.push(
      `${book.file}: peak RSS ${mib.toFixed(0)} MB (≤ 300) ${
        measure.peakRss <= MAX_PEAK_RSS ? "met" : "MISSED"
      }`,
    );
  }
  return lines;
}

function row(book: Expected, measure: Measure, problems: string[]): string[] {
  const megabytes = measure.bytes / 1e6;
  const titlesEqual = book.chapters === null
    ? "—"
    : `${
      measure.chapters.filter((title, index) => title === book.chapters?.[index]).length
    }/${book.chapterCount}`;
  return [
    book.file.replace(/\.gz$/, ""),
    megabytes.toFixed(2),
    `${measure.chapters.length}/${book.chapterCount}`,
    titlesEqual,
    `${(measure.kept * 100).toFixed(2)} %`,
    String(measure.boilerplate),
    measure.licenceChars === 0 ? "—" : `${measure.licenceChars} ch`,
    String(measure.brokenLinks),
    measure.title === book.title ? "yes" : "no",
    measure.author === book.author ? "yes" : "no",
    measure.wallMs.toFixed(0),
    (megabytes / (measure.wallMs / 1000)).toFixed(1),
    (megabytes / (measure.cpuMs / 1000)).toFixed(1),
    (megabytes / (measure.warmCpuMs / 1000)).toFixed(1),
    `${(measure.peakRss / 1024 / 1024).toFixed(0)} MB`,
    [...summarise(measure.warnings), ...problems.map((problem) => `MISS: ${problem}`)].join("; "),
  ];
}

/** Warnings for the table: each distinct one once, a long list cut to its first three. */
function summarise(warnings: string[]): string[] {
  const distinct = [...new Set(warnings)];
  return distinct.length <= 3
    ? distinct
    : [...distinct.slice(0, 3), `… ${distinct.length - 3} more`];
}

async function measureInChild(path: string): Promise<Measure> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--one", path],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!output.success) throw new Error(`Cannot measure "${path}": the child process failed`);
  return JSON.parse(new TextDecoder().decode(output.stdout)) as Measure;
}

async function measureOne(path: string): Promise<Measure> {
  const bytes = (await Deno.stat(path)).size;
  const signal = new AbortController().signal;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  let book: Awaited<ReturnType<typeof extractInProcess>> | null = await extractInProcess(
    path,
    signal,
  );
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const peak = peakRss();
  const chapters = book.chapters.map((chapter) => chapter.title);
  const chapterTexts = book.chapters.map((chapter) =>
    `${chapter.title}\n${htmlText(chapter.html)}`
  );
  const { title, author } = book;
  const broken = brokenLinks(book).length;
  const licenceChars = book.licence?.length ?? 0;
  // The licence kept with the edition is kept too: the reader finds it on the edition's page.
  const licence = book.licence ?? "";
  const warnings = (book.warnings ?? []).map((warning) => warning.message);
  book = null;
  const kept = keptShare(await visibleSourceText(path), `${chapterTexts.join("\n")}\n${licence}`);
  const warmBefore = process.cpuUsage();
  await extractInProcess(path, signal);
  const warm = process.cpuUsage(warmBefore);
  return {
    chapters,
    title,
    author,
    warnings,
    kept,
    boilerplate: chapterTexts.filter((text) => BOILERPLATE.test(text)).length,
    brokenLinks: broken,
    licenceChars,
    bytes,
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    warmCpuMs: (warm.user + warm.system) / 1000,
    peakRss: peak,
  };
}

/** Share of the source's words (with their counts) found in the kept text. */
function keptShare(source: string, kept: string): number {
  const count = (text: string): Map<string, number> => {
    const words = new Map<string, number>();
    for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
      words.set(word, (words.get(word) ?? 0) + 1);
    }
    return words;
  };
  const have = count(kept);
  let total = 0;
  let found = 0;
  for (const [word, times] of count(source)) {
    total += times;
    found += Math.min(times, have.get(word) ?? 0);
  }
  return total === 0 ? 1 : found / total;
}

/** Peak resident set size of this process in bytes (Linux `VmHWM`), else the current RSS. */
function peakRss(): number {
  try {
    const status = Deno.readTextFileSync("/proc/self/status");
    const match = /^VmHWM:\s+(\d+) kB/m.exec(status);
    if (match !== null) return Number(match[1]) * 1024;
  } catch {
    // Not Linux: the current RSS is the best there is.
  }
  return Deno.memoryUsage().rss;
}

function printTable(rows: string[][]): void {
  const widths = rows[0].map((_, column) =>
    Math.max(...rows.map((cells) => (column === rows[0].length - 1 ? 0 : cells[column].length)))
  );
  for (const cells of rows) {
    console.log(cells.map((cell, column) => cell.padEnd(widths[column])).join("  ").trimEnd());
  }
}
