/**
 * Hostile books for the bound on extraction: small files whose parse needs far more memory than
 * any real book, built in memory with fflate (never committed), and a reading of a process
 * tree's memory to prove the bound.
 *
 * @module
 */
import assert from "node:assert/strict";
import { CONTAINER, packageDocument, xhtml, zipEpub } from "./_epub.ts";

/**
 * An EPUB of one chapter holding `elements` tiny elements (`<b>a</b>`, each a node and a text
 * node in the parsed tree), inside the archive limits: 3,000,000 of them deflate to ~40 KB and
 * unpack to 24 MB (under `MAX_ENTRY_BYTES`), and their parse needs several GB of heap.
 *
 * @param elements how many elements; the default outgrows `CHILD_HEAP_MB` many times over.
 * @returns the archive's bytes.
 */
export function hostileEpub(elements = 3_000_000): Uint8Array {
  return zipEpub({
    "META-INF/container.xml": CONTAINER,
    "OEBPS/content.opf": packageDocument({
      metadata: "<dc:title>Millions of Nothing</dc:title><dc:language>en</dc:language>",
      manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>',
      spine: '<itemref idref="c1"/>',
    }),
    "OEBPS/c1.xhtml": xhtml("Millions", `<p>${"<b>a</b>".repeat(elements)}</p>`),
  });
}

/** A small well-formed EPUB of two chapters, read through the extraction child. */
export function normalEpub(): Uint8Array {
  const chapter = (n: number) =>
    xhtml(`Chapter ${n}`, `<h1>Chapter ${n}</h1><p>The lighthouse keeper wrote page ${n}.</p>`);
  return zipEpub({
    "META-INF/container.xml": CONTAINER,
    "OEBPS/content.opf": packageDocument({
      metadata: "<dc:title>The Keeper</dc:title><dc:language>en</dc:language>",
      manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>' +
        '<item id="c2" href="c2.xhtml" media-type="application/xhtml+xml"/>',
      spine: '<itemref idref="c1"/><itemref idref="c2"/>',
    }),
    "OEBPS/c1.xhtml": chapter(1),
    "OEBPS/c2.xhtml": chapter(2),
  });
}

/** The pids of `pid`'s descendants, from `/proc/<pid>/task/<tid>/children` (Linux). */
export function descendants(pid: number): number[] {
  const found: number[] = [];
  const todo = [pid];
  while (todo.length > 0) {
    const at = todo.pop()!;
    let tasks: Deno.DirEntry[] = [];
    try {
      tasks = [...Deno.readDirSync(`/proc/${at}/task`)];
    } catch {
      continue; // Gone meanwhile.
    }
    for (const task of tasks) {
      let text = "";
      try {
        text = Deno.readTextFileSync(`/proc/${at}/task/${task.name}/children`);
      } catch {
        continue;
      }
      for (const child of text.trim().split(/\s+/).filter(Boolean).map(Number)) {
        found.push(child);
        todo.push(child);
      }
    }
  }
  return found;
}

/** Resident memory of one process, bytes (`VmRSS`); 0 when it is gone. */
export function rssBytes(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    return kb === undefined ? 0 : Number(kb) * 1024;
  } catch {
    return 0;
  }
}

/** A sampler of the resident memory of a process and all its descendants, summed. */
export interface TreeRss {
  /** The highest sum seen so far, bytes. */
  peak(): number;
  /** Stop sampling. */
  stop(): void;
}

/**
 * Sample the summed RSS of `pid` and its descendants every `everyMs`.
 *
 * @param pid the root of the tree (a spawned worker).
 */
export function sampleTreeRss(pid: number, everyMs = 25): TreeRss {
  let peak = 0;
  const sample = () => {
    const sum = [pid, ...descendants(pid)].reduce((total, p) => total + rssBytes(p), 0);
    peak = Math.max(peak, sum);
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return { peak: () => (sample(), peak), stop: () => clearInterval(timer) };
}

/**
 * Names of the kernel functions the threads of this process and of its descendants (the
 * extraction child) are sleeping in (Linux `wchan`).
 */
export async function threadWaits(): Promise<string[]> {
  const waits: string[] = [];
  for (const pid of [Deno.pid, ...descendants(Deno.pid)]) {
    const tasks = await Array.fromAsync(Deno.readDir(`/proc/${pid}/task`)).catch(() => []);
    for (const task of tasks) {
      waits.push(await Deno.readTextFile(`/proc/${pid}/task/${task.name}/wchan`).catch(() => ""));
    }
  }
  return waits;
}

/**
 * Wait, for at most 5 s, until some thread is (or no thread is) asleep in a kernel function
 * matching `wait`: `wait_for_partner` is opening a FIFO with no one at the other end, `pipe_read`
 * (`anon_pipe_read` on newer kernels, `pipe_wait` on older) is reading an empty pipe.
 */
export async function waitForThreads(wait: RegExp, present: boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while ((await threadWaits()).some((name) => wait.test(name)) !== present) {
    assert.ok(Date.now() < deadline, `no thread ${present ? "entered" : "left"} ${wait} in time`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
