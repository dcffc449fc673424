/**
 * Small operating-system helpers the tests share: free ports and FIFOs (a FIFO with no writer
 * keeps a job's run in flight without any test hook).
 *
 * @module
 */
import assert from "node:assert/strict";

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** Create a FIFO (named pipe) at `path`; fails the test when `mkfifo` does. */
export async function mkfifo(path: string): Promise<void> {
  const out = await new Deno.Command("mkfifo", { args: [path], stderr: "piped" }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

/**
 * Release any open of `path` still waiting for a writer, so a test leaks no pending op. Opening a
 * FIFO read-write never blocks on Linux, and as a writer it lets a waiting reader's open through.
 */
export async function releaseFifo(path: string): Promise<void> {
  (await Deno.open(path, { read: true, write: true })).close();
}
