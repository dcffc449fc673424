/**
 * `deno task fidelity`: the fidelity report on the regression set (issue 10, "Measured"). Per book:
 * chapters found against expected (count, and titles equal), the share of the source's visible
 * words kept in the chapters, Project Gutenberg licence text left in, title and author found,
 * warnings, extraction time, MB/s and peak RSS. Each book is extracted in a child process of its
 * own (`--one <path>`), so its peak RSS (Linux `VmHWM`) is that book's alone. Prints a table and
 * exits 1 when a book misses a target (chapters exact, title/author, ≥ 99 % kept, no licence).
 *
 * The source's visible words: for plain text and Markdown, the words of the file inside the
 * Gutenberg frame; for HTML, the text of `<body>` less `<script>`/`<style>`, inside the frame.
 * A word is a run of letters or digits; the share kept counts each source word at most as often
 * as the chapters (and their titles) hold it. EPUBs listed in the set are extracted and checked
 * for chapters, title and author; their kept share is left to the EPUB report (`—`).
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { extname } from "node:path";
import process from "node:process";
import { extractInProcess } from "../books/extract_in_process.ts";
import { decodeBookBytes } from "../books/decode.ts";
import { stripGutenbergFrame } from "../books/gutenberg.ts";
import { parseMarkup } from "../books/markup.ts";
import { htmlText } from "../books/sanitize.ts";
import { layOut, readSet, type SetBook } from "./_regression_set.ts";

/** What one child process reports for one book. */
interface Measure {
  chapters: string[];
  title: string;
  author: string | null;
  warnings: string[];
  /** Share of the source's visible words found in the chapters, 0…1; `null` when not measured. */
  kept: number | null;
  /** Chapters holding Project Gutenberg licence or frame text. */
  boilerplate: number;
  /** Wall-clock and CPU time of the extraction, ms. */
  wallMs: number;
  cpuMs: number;
  bytes: number;
  /** Peak resident set of the child process, bytes. */
  peakRss: number;
}

const BOILERPLATE =
  /Project Gutenberg(?:-tm| Literary Archive| License)|(?:START|END) OF (?:THE|THIS) PROJECT GUTENBERG/i;

if (Deno.args[0] === "--one") {
  console.log(JSON.stringify(await measureOne(Deno.args[1])));
} else {
  Deno.exit(await report());
}

async function report(): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "fidelity_" });
  const rows: string[][] = [];
  let misses = 0;
  try {
    for (const book of await readSet()) {
      const { path } = await layOut(book, dir);
      const measure = await measureInChild(path);
      const problems = judge(book, measure);
      misses += problems.length === 0 ? 0 : 1;
      rows.push(row(book, measure, problems));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  printTable([
    [
      "book",
      "chapters",
      "titles",
      "kept",
      "licence",
      "title",
      "author",
      "ms",
      "cpu ms",
      "MB/s",
      "MB/s cpu",
      "peak RSS",
      "warnings / misses",
    ],
    ...rows,
  ]);
  console.log(`\n${rows.length - misses} of ${rows.length} books meet every target`);
  return misses === 0 ? 0 : 1;
}

function judge(book: SetBook, measure: Measure): string[] {
  const problems: string[] = [];
  if (measure.chapters.length !== book.chapters.length) problems.push("chapter count");
  else if (measure.chapters.some((title, index) => title !== book.chapters[index])) {
    problems.push("chapter titles");
  }
  if (measure.title !== book.title) problems.push(`title "${measure.title}"`);
  if (measure.author !== book.author) problems.push(`author "${measure.author}"`);
  if (measure.kept !== null && measure.kept < 0.99) problems.push("text lost");
  if (measure.boilerplate > 0) problems.push("licence text");
  return problems;
}

function row(book: SetBook, measure: Measure, problems: string[]): string[] {
  const megabytes = measure.bytes / 1e6;
  const titlesEqual = measure.chapters.filter((title, index) => title === book.chapters[index]);
  return [
    book.file.replace(/\.gz$/, ""),
    `${measure.chapters.length}/${book.chapters.length}`,
    `${titlesEqual.length}/${book.chapters.length}`,
    measure.kept === null ? "—" : `${(measure.kept * 100).toFixed(2)} %`,
    String(measure.boilerplate),
    measure.title === book.title ? "yes" : "no",
    measure.author === book.author ? "yes" : "no",
    measure.wallMs.toFixed(0),
    measure.cpuMs.toFixed(0),
    (megabytes / (measure.wallMs / 1000)).toFixed(1),
    (megabytes / (measure.cpuMs / 1000)).toFixed(1),
    `${(measure.peakRss / 1024 / 1024).toFixed(0)} MB`,
    [...measure.warnings, ...problems.map((problem) => `MISS: ${problem}`)].join("; "),
  ];
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
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const book = await extractInProcess(path, new AbortController().signal);
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const chapterTexts = book.chapters.map((chapter) =>
    `${chapter.title}\n${htmlText(chapter.html)}`
  );
  const source = extname(path) === ".epub" ? null : await visibleSourceText(path);
  return {
    chapters: book.chapters.map((chapter) => chapter.title),
    title: book.title,
    author: book.author,
    warnings: (book.warnings ?? []).map((warning) => warning.message),
    kept: source === null ? null : keptShare(source, chapterTexts.join("\n")),
    boilerplate: chapterTexts.filter((text) => BOILERPLATE.test(text)).length,
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    bytes,
    peakRss: peakRss(),
  };
}

/** The words a reader of the source sees (see the module comment). */
async function visibleSourceText(path: string): Promise<string> {
  const extension = extname(path).toLowerCase();
  const html = extension === ".html" || extension === ".htm" || extension === ".xhtml";
  const text = decodeBookBytes(await Deno.readFile(path), html ? "html" : "text").text;
  if (!html) return stripGutenbergFrame(text).body;
  const document = parseMarkup(text);
  for (
    const hidden of DomUtils.findAll(
      (e) => ["script", "style", "head"].includes(e.name),
      document.children,
    )
  ) {
    DomUtils.removeElement(hidden);
  }
  const lines = DomUtils.findAll(() => true, document.children).filter((e) => e.name === "br");
  for (const line of lines) {
    DomUtils.replaceElement(line, { ...line, type: "text", data: " " } as never);
  }
  return stripGutenbergFrame(DomUtils.textContent(document)).body;
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
