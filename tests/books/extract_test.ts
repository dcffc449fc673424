/**
 * `extractBook()` as a whole: choosing the format, reading the file (missing, empty, a directory,
 * too large, denied), honouring the abort signal on a FIFO that blocks, and which failures are an
 * `UnreadableBookError` (permanent) and which propagate as-is (transient).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { extractBook, UnreadableBookError } from "../../books/extract.ts";
import { mkfifo } from "../_fs.ts";
import { waitForThreads } from "../_hostile.ts";

async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "extract_test_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function assertUnreadable(work: Promise<unknown>, message: string | RegExp): Promise<void> {
  await assert.rejects(work, (error: unknown) => {
    assert.ok(error instanceof UnreadableBookError, `expected UnreadableBookError, got ${error}`);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    return true;
  });
}

function signal(): AbortSignal {
  return new AbortController().signal;
}

const OPENING_FIFO = /wait_for_partner/;
const READING_PIPE = /pipe_(read|wait)/;

/** `work`, or a rejection when it has not settled within `ms`: a hang fails instead of stalling. */
async function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("extractBook() picks the format from the extension, case-insensitively", async () => {
  await inTempDir(async (dir) => {
    const cases: [string, string][] = [
      ["a.txt", "text"],
      ["b.TXT", "text"],
      ["c.md", "markdown"],
      ["d.markdown", "markdown"],
      ["e.html", "html"],
      ["f.htm", "html"],
      ["g.xhtml", "html"],
    ];
    for (const [name, format] of cases) {
      await Deno.writeTextFile(join(dir, name), "Some words.\n");
      const book = await extractBook(join(dir, name), signal());
      assert.equal(book.format, format, name);
    }
  });
});

Deno.test("extractBook() refuses an unknown extension, naming it", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "book.pdf");
    await Deno.writeTextFile(path, "%PDF-1.7");
    await assertUnreadable(
      extractBook(path, signal()),
      `Cannot read book "${path}": unknown file type ".pdf", expected one of ` +
        ".txt, .md, .markdown, .html, .htm, .xhtml, .epub, .zip, .gz",
    );
    const bare = join(dir, "README");
    await Deno.writeTextFile(bare, "words");
    await assertUnreadable(extractBook(bare, signal()), /the file name has no extension/);
  });
});

Deno.test("extractBook() reports a missing file as unreadable", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "gone.epub");
    await assert.rejects(extractBook(path, signal()), (error: unknown) => {
      assert.ok(error instanceof UnreadableBookError);
      assert.equal(error.message, `Cannot read EPUB "${path}": file not found`);
      assert.ok(error.cause instanceof Deno.errors.NotFound);
      return true;
    });
    // A path through a file instead of a directory names no file either.
    await Deno.writeTextFile(join(dir, "plain.txt"), "words");
    const through = join(dir, "plain.txt", "book.txt");
    await assertUnreadable(
      extractBook(through, signal()),
      `Cannot read text file "${through}": file not found`,
    );
  });
});

Deno.test("extractBook() reports an empty or whitespace-only file as unreadable", async () => {
  await inTempDir(async (dir) => {
    for (const [name, content] of [["a.txt", ""], ["b.md", " \n\t\r\n"], ["c.epub", "\n"]]) {
      const path = join(dir, name);
      await Deno.writeTextFile(path, content);
      await assertUnreadable(extractBook(path, signal()), /: the file is empty$/);
    }
  });
});

// Latin-1 books must never be Failed as "not valid UTF-8"; they are decoded, with a warning.
Deno.test("extractBook() decodes a text book that is not UTF-8 as detected, with a warning", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "latin1.txt");
    await Deno.writeFile(path, new Uint8Array([0x43, 0x61, 0x66, 0xe9, 0x0a])); // "Café" in Latin-1
    const book = await extractBook(path, signal());
    assert.equal(book.chapters[0].html, "<p>Café</p>");
    assert.deepEqual(book.warnings?.filter((warning) => warning.kind === "encoding_guessed"), [
      {
        kind: "encoding_guessed",
        message: 'encoding guessed as "windows-1252" (no encoding declared)',
      },
    ]);
  });
});

Deno.test("extractBook() reports a book with no chapters as unreadable", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "hollow.html");
    await Deno.writeTextFile(path, "<html><body><script>alert(1)</script></body></html>");
    await assertUnreadable(
      extractBook(path, signal()),
      `Cannot read HTML "${path}": no chapters found`,
    );
  });
});

// A directory can never become a book by retrying, so it is as permanent as a missing file.
Deno.test("extractBook() reports a directory as unreadable, not as an I/O error", async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, "volume.txt");
    await Deno.mkdir(path);
    await assertUnreadable(
      extractBook(path, signal()),
      `Cannot read text file "${path}": the path is a directory, not a file`,
    );
  });
});

Deno.test("extractBook() refuses a file past the size limit without reading it all", async () => {
  await inTempDir(async (dir) => {
    // A device reports size 0 to stat and never ends: only the running count can stop it.
    const path = join(dir, "endless.txt");
    await Deno.symlink("/dev/zero", path);
    await assertUnreadable(
      extractBook(path, signal()),
      /the file exceeds the size limit of "268435456" bytes$/,
    );
  });
});

Deno.test("extractBook() lets a permission error propagate, not as unreadable", async () => {
  await inTempDir(async (dir) => {
    const book = join(dir, "book.txt");
    await Deno.writeTextFile(book, "Some words.\n");
    const script = join(dir, "probe.ts");
    await Deno.writeTextFile(
      script,
      `import { closeExtractor, extractBook, UnreadableBookError } from ${
        JSON.stringify(new URL("../../books/extract.ts", import.meta.url).href)
      };
try {
  await extractBook(${JSON.stringify(book)}, new AbortController().signal);
  console.log(JSON.stringify({ resolved: true }));
} catch (error) {
  console.log(JSON.stringify({
    notCapable: error instanceof Deno.errors.NotCapable,
    unreadable: error instanceof UnreadableBookError,
  }));
} finally {
  closeExtractor();
}
`,
    );
    const config = new URL("../../deno.json", import.meta.url).pathname;
    // Reading the book is denied: opening it fails the way a misconfigured deployment would. The
    // extraction worker inherits the denial, and its NotCapable arrives rebuilt as one.
    const output = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        `--deny-read=${book}`,
        "--no-prompt",
        "--config",
        config,
        script,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(output.stderr);
    assert.ok(output.success, stderr);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(output.stdout)), {
      notCapable: true,
      unreadable: false,
    });
  });
});

Deno.test("extractBook() rejects with the reason of an already aborted signal", async () => {
  const controller = new AbortController();
  const reason = new Error("shutting down");
  controller.abort(reason);
  // The path does not exist: a file-not-found error would mean it looked before checking.
  await assert.rejects(extractBook("/nonexistent/book.txt", controller.signal), (error) => {
    assert.equal(error, reason);
    return true;
  });
});

Deno.test("extractBook() rejects promptly with the abort reason while a FIFO open blocks", async () => {
  await inTempDir(async (dir) => {
    const fifo = join(dir, "upload.txt");
    await mkfifo(fifo);
    const controller = new AbortController();
    const reason = new DOMException("job cancelled", "AbortError");
    const extraction = extractBook(fifo, controller.signal);
    // Opening a FIFO blocks until a writer opens it; wait until the open is really stuck there.
    await waitForThreads(OPENING_FIFO, true);
    const abortedAt = performance.now();
    controller.abort(reason);
    await assert.rejects(within(extraction, 1_000), (error: unknown) => {
      assert.equal(error, reason);
      assert.ok(!(error instanceof UnreadableBookError));
      return true;
    });
    const elapsedMs = performance.now() - abortedAt;
    assert.ok(elapsedMs < 200, `took ${elapsedMs} ms to reject`);
    // The abort killed the extraction child, and its blocked open with it.
    await waitForThreads(OPENING_FIFO, false);
  });
});

Deno.test("extractBook() rejects promptly with the abort reason while a FIFO read blocks", async () => {
  await inTempDir(async (dir) => {
    const fifo = join(dir, "upload.md");
    await mkfifo(fifo);
    const controller = new AbortController();
    const extraction = extractBook(fifo, controller.signal);
    // The writer sends part of a book and then holds the FIFO open without writing, so the
    // reader's next read blocks. `exec sleep` keeps one process to kill.
    const writer = new Deno.Command("sh", {
      args: [
        "-c",
        'exec 3>"$1"; printf "# Title\\n\\nPart" >&3; echo written; exec sleep 60',
        "sh",
        fifo,
      ],
      stdout: "piped",
    }).spawn();
    try {
      const reader = writer.stdout.getReader();
      const { value } = await reader.read();
      reader.releaseLock();
      assert.equal(new TextDecoder().decode(value).trim(), "written");
      // The open is done (the writer's open waited for it); wait for the read that follows.
      await waitForThreads(READING_PIPE, true);
      const abortedAt = performance.now();
      controller.abort();
      await assert.rejects(within(extraction, 1_000), (error: unknown) => {
        assert.ok(error instanceof DOMException, `expected the default AbortError, got ${error}`);
        assert.equal(error.name, "AbortError");
        return true;
      });
      const elapsedMs = performance.now() - abortedAt;
      assert.ok(elapsedMs < 200, `took ${elapsedMs} ms to reject`);
    } finally {
      writer.kill("SIGKILL");
      await writer.status;
      await writer.stdout.cancel();
    }
  });
});

Deno.test("extractBook() reads a book from a FIFO until its writer closes it", async () => {
  await inTempDir(async (dir) => {
    const fifo = join(dir, "stream.txt");
    await mkfifo(fifo);
    const extraction = extractBook(fifo, signal());
    const writer = await Deno.open(fifo, { write: true });
    await writer.write(new TextEncoder().encode("Streamed\n\nby Pip Pipe\n\nCHAPTER I\n\nFlow.\n"));
    writer.close();
    const book = await extraction;
    assert.equal(book.title, "Streamed");
    assert.equal(book.author, "Pip Pipe");
    assert.deepEqual(book.chapters, [{ title: "CHAPTER I", html: "<p>Flow.</p>" }]);
  });
});
