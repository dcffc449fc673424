/**
 * A queue's wake signal: "this queue may be non-empty". NOTIFY, the poll timer, every `onlisten`
 * (first listen and each reconnect) and the end of each job all feed it. It is a `drop-write`
 * {@linkcode BoundedChannel} of capacity 1 (ADR-052: coalescing work), so any number of wakes
 * while one is pending collapse into it, and a wake that arrives while the consumer is claiming
 * stays pending instead of being lost.
 *
 * @module
 */
import { BoundedChannel } from "./channel.ts";

/**
 * One queue's coalescing wake signal.
 *
 * @example
 * const wake = new Wake("ingestion");
 * wake.notify(); wake.notify(); // coalesced into one pending wake
 * while (await wake.wait(signal)) await drainQueue();
 */
export class Wake {
  readonly #channel: BoundedChannel<true>;

  constructor(name: string) {
    this.#channel = new BoundedChannel<true>({
      capacity: 1,
      mode: "drop-write",
      name: `${name} wake`,
    });
  }

  /** Mark the queue as possibly non-empty; never blocks, never throws. */
  notify(): void {
    this.#channel.tryWrite(true);
  }

  /**
   * Wait for a pending wake and consume it.
   *
   * @param signal stops the wait.
   * @returns true on a wake; false once `signal` has aborted.
   */
  async wait(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false;
    try {
      if (!(await this.#channel.waitToRead(signal))) return false;
    } catch (err) {
      if (signal.aborted) return false;
      throw err;
    }
    this.#channel.tryRead();
    return !signal.aborted;
  }

  /** How many wakes were coalesced into a pending one so far. */
  get coalesced(): number {
    return this.#channel.stats().dropped;
  }
}
