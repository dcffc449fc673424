/**
 * `extractBook()` running in its child process: the main thread's event loop keeps ticking
 * through a long or runaway parse, an abort kills the child promptly, markup nested too deeply is
 * refused quickly, a parse that outgrows the child's heap is an unreadable book, a transient I/O
 * error still arrives as one, concurrent calls run one child at a time, a huge book still works,
 * and an idle child lets a script exit.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  BIG_RESULT_BYTES,
  closeExtractor,
  extractBook,
  IDLE_MS,
  INLINE_BOOK_BYTES,
  UnreadableBookError,
} from "../../books/extract.ts";
import {
  descendants,
  hostileEpub,
  normalEpub,
  sampleTreeRss,
  waitForThreads,
} from "../_hostile.ts";
import { mkfifo } from "../_fs.ts";

async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "extract_worker_test_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function signal(): AbortSignal {
  return new AbortController().signal;
}

/**
 * Run `work` while a 10 ms interval ticks on this thread; return its outcome and the longest gap
 * between ticks (ms), which is how long the event loop was blocked at most.
 */
async function whileTicking<T>(
  work: () => Promise<T>,
): Promise<{ outcome: PromiseSettledResult<T>; maxGapMs: number; elapsedMs: number }> {
  const startedAt = performance.now();
  let last = startedAt;
  let maxGapMs = 0;
  const interval = setInterval(() => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
  }, 10);
  try {
    const [outcome] = await Promise.allSettled([work()]);
    maxGapMs = Math.max(maxGapMs, performance.now() - last);
    return { outcome, maxGapMs, elapsedMs: performance.now() - startedAt };
  } finally {
    clearInterval(interval);
  }
}

/**
 * The main thread kept ticking while the worker parsed: no gap over 200 ms, or, on a loaded
 * machine where every thread is slowed, none over a fifth of the whole extraction. A parse on the
 * main thread would stall it for nearly all of it.
 */
function assertResponsive(maxGapMs: number, elapsedMs: number): void {
  assert.ok(
    maxGapMs < Math.max(200, elapsedMs / 5),
    `the event loop stalled for ${maxGapMs} ms of a ${elapsedMs} ms extraction`,
  );
}

/** Paragraphs `Text of <name>.`, more than {@linkcode INLINE_BOOK_BYTES} of them: a worker's book. */
function overInline(name: string): string {
  const paragraph = `Text of ${name}.\n\n`;
  return paragraph.repeat(Math.ceil(INLINE_BOOK_BYTES / paragraph.length) + 1);
}

/** An HTML book of `chapters` `h2` chapters of ten paragraphs each (~1 KiB per chapter). */
function bigHtml(chapters: number): string {
  const paragraph =
    "<p>It was a dark and stormy night; the rain fell in torrents, now and then.</p>\n";
  const body = Array.from(
    { length: chapters },
    (_, index) => `<h2>Chapter ${index + 1}</h2>\n${paragraph.repeat(10)}`,
  );
  return `<html><head><title>Big</title></head><body><h1>Big</h1>${body.join("")}</body></html>`;
}

// Field report: this file parsed for 17 s on the main thread, stalling the HTTP API, the lock
// heartbeat and shutdown, then failed with "Maximum call stack size exceeded".
Deno.test("extractBook() refuses 200,000 nested elements quickly without blocking the event loop", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "deep.html");
    await Deno.writeTextFile(
      path,
      `<html><body><h1>x</h1>${"<div>".repeat(200_000)}deep${
        "</div>".repeat(200_000)
      }</body></html>`,
    );
    const { outcome, maxGapMs, elapsedMs } = await whileTicking(() => extractBook(path, signal()));
    assert.equal(outcome.status, "rejected");
    const error = (outcome as PromiseRejectedResult).reason;
    assert.ok(error instanceof UnreadableBookError, `expected UnreadableBookError, got ${error}`);
    assert.equal(
      error.message,
      `Cannot read HTML "${path}": the file could not be parsed: ` +
        'elements are nested more than "512" deep',
    );
    assert.ok(elapsedMs < 5_000, `took ${elapsedMs} ms`);
    assertResponsive(maxGapMs, elapsedMs);
  });
});

Deno.test("extractBook() reports a stack overflow while parsing as unreadable", async () => {
  await inTempDir(async (dir) => {
    // marked recurses once per quote level, far below the markup nesting bound's reach.
    const path = join(dir, "quotes.md");
    await Deno.writeTextFile(path, `${">".repeat(100_000)} deep\n`);
    await assert.rejects(extractBook(path, signal()), (error: unknown) => {
      assert.ok(error instanceof UnreadableBookError, `expected UnreadableBookError, got ${error}`);
      assert.equal(
        error.message,
        `Cannot read Markdown "${path}": the file could not be parsed: it is nested too deeply`,
      );
      return true;
    });
  });
});

Deno.test("extractBook() keeps the event loop responsive and aborts within 200 ms during a long parse", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "long.html");
    await Deno.writeTextFile(path, bigHtml(6_000));
    // Uninterrupted first: the event loop ticks while the worker parses.
    const { outcome, maxGapMs, elapsedMs } = await whileTicking(() => extractBook(path, signal()));
    assert.equal(outcome.status, "fulfilled");
    assert.equal(
      (outcome as PromiseFulfilledResult<{ chapters: unknown[] }>).value.chapters.length,
      6_000,
    );
    assertResponsive(maxGapMs, elapsedMs);

    // The warm worker parses the same book faster than the first, cold one: time it again, so the
    // abort below lands in the middle of a parse and not after it.
    const warmStartedAt = performance.now();
    await extractBook(path, signal());
    const parseMs = performance.now() - warmStartedAt;
    assert.ok(parseMs > 250, `the parse took only ${parseMs} ms: too short to abort in the middle`);

    // Then aborted early in the same parse (a quarter in, at most 100 ms: one run can be faster
    // than the one timed, the worker being warm or not), so it is surely still parsing.
    const controller = new AbortController();
    const reason = new DOMException("job cancelled", "AbortError");
    const extraction = extractBook(path, controller.signal);
    await new Promise((resolve) => setTimeout(resolve, Math.min(parseMs / 4, 100)));
    const abortedAt = performance.now();
    controller.abort(reason);
    await assert.rejects(extraction, (error: unknown) => {
      assert.equal(error, reason);
      return true;
    });
    const rejectMs = performance.now() - abortedAt;
    assert.ok(rejectMs < 200, `took ${rejectMs} ms to reject`);

    // The terminated worker is replaced: the next call works.
    const again = await extractBook(path, signal());
    assert.equal(again.chapters.length, 6_000);
  });
});

Deno.test("extractBook() lets an I/O error propagate as transient, with its code", async () => {
  await inTempDir(async (dir) => {
    // Reading /proc/self/mem at offset 0 (unmapped) fails with EIO on Linux.
    const path = join(dir, "mem.txt");
    await Deno.symlink("/proc/self/mem", path);
    await assert.rejects(extractBook(path, signal()), (error: unknown) => {
      assert.ok(error instanceof Error, `expected an Error, got ${error}`);
      assert.ok(!(error instanceof UnreadableBookError), `expected a transient error: ${error}`);
      assert.equal((error as { code?: unknown }).code, "EIO");
      assert.match(error.message, /Input\/output error/);
      return true;
    });
  });
});

Deno.test("extractBook() serves concurrent calls, each with its own result", async () => {
  await inTempDir(async (dir) => {
    const names = ["a", "b", "c"];
    for (const name of names) {
      // Over INLINE_BOOK_BYTES: each call goes to a worker.
      await Deno.writeTextFile(join(dir, `${name}.txt`), `Story ${name}\n\n${overInline(name)}`);
    }
    const books = await Promise.all(
      names.map((name) => extractBook(join(dir, `${name}.txt`), signal())),
    );
    assert.deepEqual(books.map((book) => book.title), ["Story a", "Story b", "Story c"]);
    assert.deepEqual(
      books.map((book) => book.chapters[0].html.slice(0, 17)),
      ["<p>Text of a.</p>", "<p>Text of b.</p>", "<p>Text of c.</p>"],
    );
  });
});

Deno.test("extractBook() reads a 20 MB text book of 20,000 chapters", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "huge.txt");
    const paragraph = "It was a dark and stormy night; the rain fell in torrents, now and then.\n";
    const chapters = Array.from(
      { length: 20_000 },
      (_, index) => `CHAPTER ${index + 1}\n\n${paragraph.repeat(7)}\n${paragraph.repeat(7)}`,
    );
    await Deno.writeTextFile(path, `The Huge Book\n\nby A. Writer\n\n${chapters.join("\n")}`);
    assert.ok((await Deno.stat(path)).size > 20_000_000);
    const { outcome, maxGapMs, elapsedMs } = await whileTicking(() => extractBook(path, signal()));
    assert.equal(outcome.status, "fulfilled");
    const book = (outcome as PromiseFulfilledResult<Awaited<ReturnType<typeof extractBook>>>).value;
    assert.equal(book.title, "The Huge Book");
    assert.equal(book.author, "A. Writer");
    assert.equal(book.chapters.length, 20_000);
    assert.equal(book.chapters[19_999].title, "CHAPTER 20000");
    assertResponsive(maxGapMs, elapsedMs);
  });
});

/**
 * Run a script that extracts one book (then calls `closeExtractor()` when `close`), and measure
 * from the extraction's end to the process's exit, in ms. The book is `text`, or with `linkTo` a
 * symbolic link to that file.
 */
async function exitDelayMs(
  dir: string,
  close: boolean,
  text = `Some words.\n\n${overInline("a worker's book")}`,
  extension = "txt",
  linkTo?: string,
): Promise<number> {
  const book = join(dir, `book_${text.length}.${extension}`);
  if (linkTo) await Deno.symlink(linkTo, book);
  else await Deno.writeTextFile(book, text);
  const script = join(dir, `probe_${close}_${text.length}.ts`);
  const module = JSON.stringify(new URL("../../books/extract.ts", import.meta.url).href);
  await Deno.writeTextFile(
    script,
    `import { closeExtractor, extractBook } from ${module};
await extractBook(${JSON.stringify(book)}, new AbortController().signal);
${close ? "closeExtractor();" : ""}
console.log(Date.now());
`,
  );
  const config = new URL("../../deno.json", import.meta.url).pathname;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--config", config, script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const exitedAt = Date.now();
  assert.ok(output.success, new TextDecoder().decode(output.stderr));
  return exitedAt - Number(new TextDecoder().decode(output.stdout).trim());
}

// An idle Deno worker keeps `deno run` alive for good; an unref'd idle timer must end it.
Deno.test("extractBook() lets a script exit once its worker idles out, or at once after closeExtractor()", async () => {
  await inTempDir(async (dir) => {
    const closedMs = await exitDelayMs(dir, true);
    assert.ok(closedMs < IDLE_MS / 2, `exited ${closedMs} ms after closeExtractor()`);
    const idleMs = await exitDelayMs(dir, false);
    assert.ok(
      idleMs >= IDLE_MS - 100,
      `exited ${idleMs} ms after the call: before the idle timeout`,
    );
    assert.ok(
      idleMs < IDLE_MS + 3_000,
      `exited ${idleMs} ms after the call: the worker kept it alive`,
    );
  });
});

// Its heap would stay allocated beside the main thread's copy of the book while it is saved.
Deno.test("extractBook() ends the worker that extracted a big book instead of idling it", async () => {
  await inTempDir(async (dir) => {
    const paragraph = "It was a dark and stormy night; the rain fell in torrents, now and then.\n";
    const text = `Big\n\n${paragraph.repeat(BIG_RESULT_BYTES / 2 / paragraph.length + 1000)}`;
    const bigMs = await exitDelayMs(dir, false, text);
    assert.ok(bigMs < IDLE_MS / 2, `exited ${bigMs} ms after the call: the worker was kept`);
  });
});

// For a tiny book the worker's round trip costs more than the parse.
Deno.test("extractBook() reads a plain-text book of INLINE_BOOK_BYTES on the calling thread: no worker idles", async () => {
  await inTempDir(async (dir) => {
    const head = "Tiny\n\nSome words";
    const text = `${head}${".".repeat(INLINE_BOOK_BYTES - head.length)}`;
    assert.equal(new TextEncoder().encode(text).length, INLINE_BOOK_BYTES);
    const tinyMs = await exitDelayMs(dir, false, text);
    assert.ok(tinyMs < IDLE_MS / 2, `exited ${tinyMs} ms after the call: a worker idled`);
  });
});

// A /proc file reports size 0 to stat; this process's memory map is more than 4 KiB of text.
Deno.test("extractBook() sends a book that outgrew its stat size to the worker", async () => {
  await inTempDir(async (dir) => {
    assert.equal((await Deno.stat("/proc/self/maps")).size, 0);
    const grownMs = await exitDelayMs(dir, false, "", "txt", "/proc/self/maps");
    assert.ok(grownMs >= IDLE_MS - 100, `exited ${grownMs} ms after the call: no worker idled`);
  });
});

// Their parsers have inputs a few KiB long that take hundreds of ms (docs/performance.md).
Deno.test("extractBook() sends a tiny Markdown book to the worker", async () => {
  await inTempDir(async (dir) => {
    const tinyMs = await exitDelayMs(dir, false, "# Tiny\n\nSome words.\n", "md");
    assert.ok(tinyMs >= IDLE_MS - 100, `exited ${tinyMs} ms after the call: no worker idled`);
  });
});

Deno.test("closeExtractor() leaves the next extractBook() call working", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "again.txt");
    await Deno.writeTextFile(path, `Again\n\n${overInline("again")}`);
    closeExtractor();
    closeExtractor();
    assert.equal((await extractBook(path, signal())).title, "Again");
    closeExtractor();
    assert.equal((await extractBook(path, signal())).title, "Again");
  });
});

// An EPUB of ~40 KB whose chapter is 3,000,000 tiny elements: in this process its parse grew the
// heap past 4 GB until V8 aborted the process.
Deno.test("extractBook() refuses a book whose parse outgrows the child's heap, and this process never notices", async () => {
  await inTempDir(async (dir) => {
    const hostile = join(dir, "hostile.epub");
    await Deno.writeFile(hostile, hostileEpub());
    const rss = sampleTreeRss(Deno.pid);
    const { outcome, maxGapMs, elapsedMs } = await whileTicking(() =>
      extractBook(hostile, signal())
    );
    rss.stop();
    assert.equal(outcome.status, "rejected");
    const error = (outcome as PromiseRejectedResult).reason;
    assert.ok(error instanceof UnreadableBookError, String(error));
    assert.match(
      error.message,
      /^Cannot read EPUB ".*hostile\.epub": the book is too complex to read: reading it needed more than \d+ MiB of memory$/,
    );
    assertResponsive(maxGapMs, elapsedMs);
    const peak = rss.peak();
    assert.ok(peak < 1024 ** 3, `this process and its child peaked at ${peak} bytes`);
    // The next book gets a new child.
    const normal = join(dir, "keeper.epub");
    await Deno.writeFile(normal, normalEpub());
    assert.equal((await extractBook(normal, signal())).title, "The Keeper");
    closeExtractor();
  });
});

Deno.test("extractBook() kills the extraction child at once when aborted mid-parse", async () => {
  await inTempDir(async (dir) => {
    const hostile = join(dir, "hostile.epub");
    await Deno.writeFile(hostile, hostileEpub());
    closeExtractor();
    await untilNoChild();
    const controller = new AbortController();
    const extraction = extractBook(hostile, controller.signal);
    extraction.catch(() => {});
    const pid = await waitForChild();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const abortedAt = performance.now();
    controller.abort();
    await assert.rejects(extraction, { name: "AbortError" });
    assert.ok(performance.now() - abortedAt < 200, "the abort was not prompt");
    const gone = async () => await Deno.stat(`/proc/${pid}`).then(() => false, () => true);
    for (let i = 0; i < 50 && !(await gone()); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.ok(await gone(), `the extraction child ${pid} still runs`);
  });
});

Deno.test("the extraction child outlives a SIGINT, SIGTERM or SIGHUP sent to it (a terminal's Ctrl-C, systemd's stop, a closed terminal): the book still comes back, and the worker alone ends it", async () => {
  await inTempDir(async (dir) => {
    closeExtractor();
    await untilNoChild();
    const fifo = join(dir, "held.md");
    await mkfifo(fifo);
    // The child blocks opening the FIFO until the test writes the book.
    const extraction = extractBook(fifo, signal());
    // Awaited below; a failed assertion first must not leave its rejection unhandled.
    extraction.catch(() => {});
    const pid = await waitForChild();
    // Wait until the child is running the book: blocked opening the FIFO.
    await waitForThreads(/wait_for_partner/, true);
    for (const name of ["SIGINT", "SIGTERM", "SIGHUP"] as const) Deno.kill(pid, name);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(await Deno.stat(`/proc/${pid}`).then(() => true, () => false), "the child died");
    await Deno.writeTextFile(fifo, "# Held\n\n## One\n\nText.\n");
    const book = await extraction;
    assert.equal(book.title, "Held");
    closeExtractor();
    const deadline = performance.now() + 5000;
    while (descendants(Deno.pid).includes(pid) && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.ok(!descendants(Deno.pid).includes(pid), "closeExtractor() left the child running");
  });
});

Deno.test("extractBook() runs concurrent calls one child at a time", async () => {
  await inTempDir(async (dir) => {
    closeExtractor();
    await untilNoChild();
    const names = ["a", "b", "c", "d"];
    for (const name of names) {
      await Deno.writeTextFile(join(dir, `${name}.md`), `# Book ${name}\n\n${overInline(name)}`);
    }
    let most = 0;
    const timer = setInterval(() => most = Math.max(most, descendants(Deno.pid).length), 2);
    const books = await Promise.all(
      names.map((name) => extractBook(join(dir, `${name}.md`), signal())),
    );
    clearInterval(timer);
    assert.deepEqual(books.map((book) => book.title), ["Book a", "Book b", "Book c", "Book d"]);
    assert.equal(most, 1, `${most} extraction children ran at once`);
    closeExtractor();
  });
});

/**
 * Wait, for at most 5 s, until this process has no child: one an earlier test killed
 * (`closeExtractor()`, an abort) is listed until it has exited and been reaped, and would be
 * taken for the next test's child.
 */
async function untilNoChild(): Promise<void> {
  const deadline = performance.now() + 5000;
  while (descendants(Deno.pid).length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.deepEqual(descendants(Deno.pid), [], "an earlier child still runs");
}

/** The pid of this process's extraction child, once it runs (call after `untilNoChild()`). */
async function waitForChild(): Promise<number> {
  for (let i = 0; i < 1000; i++) {
    const [pid] = descendants(Deno.pid);
    if (pid !== undefined) return pid;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error("no extraction child started");
}
