/**
 * The bounded in-process channel of ADR-052: a fixed capacity and a full mode chosen for the work
 * it carries, many producers, one reader, and exact accounting of every item written.
 *
 * The accounting is the point: a drop-mode write reports success even when it evicted something
 * (ADR-052: "a caller cannot learn from its return value that anything was dropped"), so the only
 * honest record of what happened to each item is `stats()` and the `onDropped` callback.
 *
 * @module
 */

/**
 * What a write does when the channel is full (ADR-052: the mode encodes what the work is worth).
 *
 * - `"wait"`: `write()` parks until the reader makes room; `tryWrite()` returns false (refused).
 * - `"drop-oldest"`: evict the oldest buffered item, accept the new one (ephemeral work).
 * - `"drop-newest"`: evict the newest buffered item, accept the new one.
 * - `"drop-write"`: discard the incoming item (coalescing work: the pending item covers it).
 *
 * @example
 * const mode: FullMode = "drop-oldest";
 */
export type FullMode = "wait" | "drop-oldest" | "drop-newest" | "drop-write";

const fullModes: readonly FullMode[] = ["wait", "drop-oldest", "drop-newest", "drop-write"];

/**
 * How to build a {@link BoundedChannel}; fixed for the channel's life.
 *
 * @example
 * const options: BoundedChannelOptions<string> = { capacity: 64, mode: "drop-oldest" };
 */
export interface BoundedChannelOptions<T> {
  /** Most items buffered at once: a positive integer. */
  capacity: number;
  /** What a write does when the buffer is full. */
  mode: FullMode;
  /**
   * Receives every item a drop mode evicts or discards, synchronously inside the write that
   * caused it, after the accounting is updated. It must not throw: an error it throws escapes
   * from that write.
   */
  onDropped?: (item: T) => void;
  /** Used in error messages only; default `"channel"`. */
  name?: string;
}

/**
 * A snapshot of a channel's accounting. At every moment
 * `delivered + dropped + refused + buffered === attempted`; once the reader has seen
 * end-of-stream, `buffered === 0`.
 *
 * `attempted` counts writes that have settled: a `"wait"` write parked for room is counted once it
 * is accepted (a read made room) or refused (`complete()` released it).
 *
 * @example
 * const { delivered, dropped, refused, buffered, attempted }: ChannelStats = channel.stats();
 */
export interface ChannelStats {
  /** Writes settled so far (`write` and `tryWrite` calls alike). */
  attempted: number;
  /** Items handed to the reader by `tryRead` or the async iterator. */
  delivered: number;
  /** Items a drop mode evicted or discarded (each one went to `onDropped`). */
  dropped: number;
  /** Writes that returned false: full in `"wait"` mode (`tryWrite`) or after `complete()`. */
  refused: number;
  /** Items in the buffer now. */
  buffered: number;
}

/**
 * What `tryRead()` returns: a tagged result rather than `T | undefined`, so a channel of a type
 * that includes `undefined` can still tell "read `undefined`" from "nothing to read".
 *
 * @example
 * const result: ReadResult<number> = channel.tryRead();
 * if (result.ok) console.log(result.value);
 */
export type ReadResult<T> = { ok: true; value: T } | { ok: false };

interface ParkedWriter<T> {
  item: T;
  settle: (accepted: boolean) => void;
}

const empty: { ok: false } = Object.freeze({ ok: false });

/**
 * A bounded, single-reader, many-writer FIFO channel with a fixed full mode (ADR-052).
 *
 * @param options `{ capacity, mode, onDropped?, name? }`; see {@link BoundedChannelOptions}.
 * @throws {RangeError} when `capacity` is not a positive integer or `mode` is not a
 *   {@link FullMode}.
 * @example
 * const channel = new BoundedChannel<string>({
 *   capacity: 256,
 *   mode: "drop-oldest",
 *   onDropped: () => droppedRefreshes++,
 * });
 * channel.tryWrite("refresh");
 * channel.complete();
 * for await (const item of channel) console.log(item); // "refresh"
 */
export class BoundedChannel<T> {
  /** Name used in error messages. */
  readonly name: string;
  /** Most items buffered at once. */
  readonly capacity: number;
  /** What a write does when the buffer is full. */
  readonly mode: FullMode;

  readonly #onDropped: ((item: T) => void) | undefined;
  // A ring over `capacity` slots so drop-oldest and reads are O(1); the array grows lazily and
  // densely (the tail only ever moves one slot forward), so a large capacity costs nothing upfront.
  readonly #ring: (T | undefined)[] = [];
  #head = 0;
  #count = 0;
  readonly #parked: ParkedWriter<T>[] = [];
  #reader: ((available: boolean) => void) | undefined;
  #completed = false;
  #attempted = 0;
  #delivered = 0;
  #dropped = 0;
  #refused = 0;

  /**
   * Build a channel whose capacity and full mode are fixed for its life.
   *
   * @param options `{ capacity, mode, onDropped?, name? }`.
   * @throws {RangeError} when `capacity` is not a positive integer or `mode` is unknown.
   */
  constructor(options: BoundedChannelOptions<T>) {
    this.name = options.name ?? "channel";
    const { capacity, mode } = options;
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(
        `Cannot create channel "${this.name}": expected capacity to be a positive integer, received ${
          String(capacity)
        }`,
      );
    }
    if (!fullModes.includes(mode)) {
      throw new RangeError(
        `Cannot create channel "${this.name}": expected mode to be one of ${
          fullModes.join(", ")
        }, received "${String(mode)}"`,
      );
    }
    this.capacity = capacity;
    this.mode = mode;
    this.#onDropped = options.onDropped;
  }

  /** Items in the buffer now. */
  get size(): number {
    return this.#count;
  }

  /** True once `complete()` has been called: every later write is refused. */
  get completed(): boolean {
    return this.#completed;
  }

  /**
   * Offer an item without waiting, applying the full mode.
   *
   * @param item the item to enqueue.
   * @returns true when the channel accepted it (in a drop mode this includes evicting another item
   *   or discarding this one: see `onDropped`); false when refused — full in `"wait"` mode, or
   *   completed. Never throws (unless `onDropped` does).
   * @example
   * if (!channel.tryWrite(job)) log.warn({ channel: channel.name }, "job refused");
   */
  tryWrite(item: T): boolean {
    if (this.#offer(item)) return true;
    this.#attempted++;
    this.#refused++;
    return false;
  }

  /**
   * Offer an item, waiting for room in `"wait"` mode; other modes settle at once like `tryWrite`.
   *
   * @param item the item to enqueue.
   * @returns a promise of true when accepted, false when refused: the channel was completed before
   *   or while this write was parked (`complete()` releases parked writers at once). Never rejects
   *   (unless `onDropped` throws).
   * @example
   * const accepted = await channel.write(job); // parks while a "wait" channel is full
   */
  write(item: T): Promise<boolean> {
    if (this.mode === "wait" && !this.#completed && this.#count === this.capacity) {
      // Parked writers keep FIFO order: a read moves the first one straight into the buffer, so
      // the buffer stays full while any are parked and a later tryWrite cannot take their slot.
      return new Promise((settle) => this.#parked.push({ item, settle }));
    }
    return Promise.resolve(this.tryWrite(item));
  }

  /**
   * Stop accepting writes; idempotent. Parked writers are released at once and resolve false;
   * buffered items stay readable, and the reader sees end-of-stream once they are consumed.
   *
   * @returns nothing.
   * @example
   * channel.complete(); // at shutdown, before draining what is left
   */
  complete(): void {
    if (this.#completed) return;
    this.#completed = true;
    for (const writer of this.#parked.splice(0)) {
      this.#attempted++;
      this.#refused++;
      writer.settle(false);
    }
    // A waiting reader implies an empty buffer, so this is end-of-stream for it.
    this.#wakeReader(false);
  }

  /**
   * Wait until an item can be read or the stream has ended; for the single reader only.
   *
   * @param signal optional; aborting it rejects the wait with `signal.reason` and frees the reader
   *   slot, so a new wait may start.
   * @returns a promise of true when `tryRead()` will return an item (only the reader removes
   *   items, so it stays true until the reader reads), false at end-of-stream: completed and
   *   drained. Every wait after end-of-stream resolves false again; no item follows it.
   * @throws {Error} synchronously when another `waitToRead` is still pending: the channel has one
   *   reader (ADR-052), and two would race for items and break ordering.
   * @example
   * while (await channel.waitToRead(signal)) {
   *   for (let r = channel.tryRead(); r.ok; r = channel.tryRead()) await handle(r.value);
   * }
   */
  waitToRead(signal?: AbortSignal): Promise<boolean> {
    if (this.#reader) {
      throw new Error(
        `Cannot wait to read channel "${this.name}": another read is already waiting (single reader, ADR-052)`,
      );
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#count > 0) return Promise.resolve(true);
    if (this.#completed) return Promise.resolve(false);
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#reader = undefined;
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#reader = (available) => {
        signal?.removeEventListener("abort", onAbort);
        this.#reader = undefined;
        resolve(available);
      };
    });
  }

  /**
   * Take the oldest buffered item without waiting; still works after `complete()`, which is how a
   * drain empties the channel at shutdown.
   *
   * @returns `{ ok: true, value }` with the oldest item, or `{ ok: false }` when the buffer is
   *   empty.
   * @example
   * for (let r = channel.tryRead(); r.ok; r = channel.tryRead()) await handle(r.value);
   */
  tryRead(): ReadResult<T> {
    if (this.#count === 0) return empty;
    const value = this.#popFront();
    this.#delivered++;
    const writer = this.#parked.shift();
    if (writer) {
      this.#pushBack(writer.item);
      this.#attempted++;
      writer.settle(true);
    }
    return { ok: true, value };
  }

  /**
   * Read every item until end-of-stream; this is the single reader while it runs.
   *
   * @returns an async iterator over items in FIFO order, ending after `complete()` once the buffer
   *   is drained.
   * @throws {Error} from `next()` when another `waitToRead` is pending.
   * @example
   * for await (const item of channel) await handle(item);
   */
  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    while (await this.waitToRead()) {
      for (let r = this.tryRead(); r.ok; r = this.tryRead()) yield r.value;
    }
  }

  /**
   * Snapshot the accounting.
   *
   * @returns `{ attempted, delivered, dropped, refused, buffered }` (counts of items); see
   *   {@link ChannelStats} for the invariant.
   * @example
   * const { dropped } = channel.stats();
   */
  stats(): ChannelStats {
    return {
      attempted: this.#attempted,
      delivered: this.#delivered,
      dropped: this.#dropped,
      refused: this.#refused,
      buffered: this.#count,
    };
  }

  // Accept `item` under the full mode, or return false for the caller to count as refused.
  #offer(item: T): boolean {
    if (this.#completed) return false;
    if (this.#count < this.capacity) {
      this.#pushBack(item);
      this.#attempted++;
      this.#wakeReader(true);
      return true;
    }
    let evicted: T;
    switch (this.mode) {
      case "wait":
        return false;
      case "drop-oldest":
        evicted = this.#popFront();
        this.#pushBack(item);
        break;
      case "drop-newest":
        evicted = this.#popBack();
        this.#pushBack(item);
        break;
      case "drop-write":
        evicted = item;
        break;
    }
    this.#attempted++;
    this.#dropped++;
    // Last, so the accounting is already exact if the callback writes again or throws.
    this.#onDropped?.(evicted);
    return true;
  }

  #wakeReader(available: boolean): void {
    this.#reader?.(available);
  }

  #pushBack(item: T): void {
    this.#ring[(this.#head + this.#count) % this.capacity] = item;
    this.#count++;
  }

  #popFront(): T {
    const item = this.#ring[this.#head] as T;
    this.#ring[this.#head] = undefined; // let the item be collected
    this.#head = (this.#head + 1) % this.capacity;
    this.#count--;
    return item;
  }

  #popBack(): T {
    const index = (this.#head + this.#count - 1) % this.capacity;
    const item = this.#ring[index] as T;
    this.#ring[index] = undefined;
    this.#count--;
    return item;
  }
}
