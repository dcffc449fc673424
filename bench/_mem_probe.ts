/**
 * Preloaded before `main.ts` by bench/idle_rss.ts (`deno run --preload`): on SIGUSR2 it writes
 * where the process's memory is, as JSON, to the file `MEM_PROBE_OUT` names: `Deno.memoryUsage()`,
 * V8's heap by space, its code statistics and malloc'd memory, before and after one full GC.
 *
 * Nothing runs at load but the signal listener (Deno runs the main module only once a preloaded
 * module's event loop is empty, and a signal listener does not hold it).
 *
 * @module
 */
import v8 from "node:v8";
import { loadGc } from "../lib/idle_gc.ts";

/** One reading of the process's memory, in bytes. */
export interface MemReading {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** V8's own malloc'd memory (zones, compiler), not in the heap. */
  malloced: number;
  /** Bytes of bytecode and metadata, and of code (`getHeapCodeStatistics`). */
  bytecode: number;
  code: number;
  /** Used bytes by heap space: `old_space`, `code_space`, `new_space`, … */
  spaces: Record<string, { used: number; size: number }>;
}

/** What the probe writes. */
export interface MemProbe {
  before: MemReading;
  afterGc: MemReading | null;
}

function read(): MemReading {
  const usage = Deno.memoryUsage();
  const heap = v8.getHeapStatistics();
  const code = v8.getHeapCodeStatistics();
  const spaces: MemReading["spaces"] = {};
  for (const s of v8.getHeapSpaceStatistics()) {
    spaces[s.space_name] = { used: s.space_used_size, size: s.space_size };
  }
  return {
    rss: usage.rss,
    heapUsed: usage.heapUsed,
    heapTotal: usage.heapTotal,
    external: usage.external,
    malloced: heap.malloced_memory,
    bytecode: code.bytecode_and_metadata_size,
    code: code.code_and_metadata_size,
    spaces,
  };
}

const out = Deno.env.get("MEM_PROBE_OUT");
if (out) {
  Deno.addSignalListener("SIGUSR2", () => {
    const before = read();
    const gc = loadGc();
    gc?.();
    const probe: MemProbe = { before, afterGc: gc ? read() : null };
    Deno.writeTextFileSync(out, JSON.stringify(probe));
  });
}
