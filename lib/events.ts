/**
 * The live event stream: every job status transition, published after its transaction commits
 * and never on rollback (ADR-052: post-commit enqueue), fanned out to each subscriber through its
 * own `drop-oldest` {@linkcode BoundedChannel} (ADR-052: ephemeral work), so a slow or stuck
 * subscriber loses its oldest events, counted, and never slows a consumer.
 *
 * @module
 */
import { BoundedChannel } from "./channel.ts";

/** A status transition's kind. */
export type Transition =
  | "claimed"
  | "completed"
  | "failed"
  | "given_back"
  | "recovered"
  | "retried"
  | "cancelled";

/** A job status transition, as published. */
export interface JobEvent {
  /** Queue name, e.g. `ingestion`. */
  queue: string;
  /** Job id (bigint as string). */
  id: string;
  transition: Transition;
  /** The job's status after the transition (the queue's ADR status name). */
  status: string;
  /** The job's attempt count after the transition. */
  attempt: number;
  /** The error text the transition wrote, if any. */
  error?: string | null;
  /**
   * `claimed` only: seconds from the moment the job became runnable to the claim, both read from
   * the database clock (`now()` of the claim minus the later of the row's last write and its
   * `run_after`); null for a stale re-pick, which no wake was for. Feeds the wake-latency metric.
   */
  runnableForS?: number | null;
}

/** A published event with its position in this process's stream (1, 2, …). */
export interface SequencedEvent extends JobEvent {
  seq: number;
}

/** Where queues publish transitions. Call `publish` only once the transition has committed. */
export interface JobEvents {
  publish(event: JobEvent): void;
}

/** One subscriber's feed. */
export interface Subscription {
  /** The subscriber's own drop-oldest channel; read it with `waitToRead`/`tryRead` or `for await`. */
  readonly channel: BoundedChannel<SequencedEvent>;
  /**
   * With `after`: the events published after it that the replay buffer still held, oldest first,
   * to be sent before the channel's (which holds only those published from now on); null when
   * they cannot be replayed (the id is another process's, unreadable, or older than the buffer):
   * the subscriber missed events it cannot get back.
   */
  readonly replay: SequencedEvent[] | null;
  /** Stop receiving; the channel completes. */
  close(): void;
}

/** Events kept for a reconnecting subscriber's `Last-Event-ID` (the replay buffer). */
export const REPLAY_EVENTS = 1024;

/**
 * Fans committed job events out to subscribers.
 *
 * @example
 * const hub = new EventHub();
 * const sub = hub.subscribe(256, () => dropped++);
 * hub.publish({ queue: "ingestion", id: "1", transition: "completed", status: "Completed", attempt: 1 });
 * for await (const event of sub.channel) send(event);
 */
export class EventHub implements JobEvents {
  readonly #subscribers = new Set<BoundedChannel<SequencedEvent>>();
  readonly #observers = new Set<(event: SequencedEvent) => void>();
  // The last REPLAY_EVENTS events, a ring: #recent[seq % capacity].
  readonly #recent: (SequencedEvent | undefined)[];
  #seq = 0;
  #droppedByClosed = 0;
  /**
   * This hub's stream name: event ids are `<epoch>-<seq>`, so an id from another process (or an
   * earlier boot) is told apart from one of this stream.
   */
  readonly epoch: string = crypto.randomUUID().slice(0, 8);

  /** @param replayCapacity events kept for `Last-Event-ID` replay. */
  constructor(readonly replayCapacity: number = REPLAY_EVENTS) {
    this.#recent = new Array(replayCapacity);
  }

  /** The stream id of a published event: `<epoch>-<seq>`. */
  eventId(event: SequencedEvent): string {
    return `${this.epoch}-${event.seq}`;
  }

  /** Number of live subscribers. */
  get subscribers(): number {
    return this.#subscribers.size;
  }

  /** Events dropped so far for the live subscribers because they fell behind. */
  get dropped(): number {
    let total = 0;
    for (const channel of this.#subscribers) total += channel.stats().dropped;
    return total;
  }

  /** Events dropped since start for every subscriber, closed ones included (ADR-052 counter). */
  get droppedTotal(): number {
    return this.#droppedByClosed + this.dropped;
  }

  /** Publish a committed transition to every subscriber; never blocks, never throws. */
  publish(event: JobEvent): void {
    const sequenced = { ...event, seq: ++this.#seq };
    this.#recent[sequenced.seq % this.replayCapacity] = sequenced;
    for (const observe of this.#observers) {
      try {
        observe(sequenced);
      } catch {
        // An observer is a counter; its fault must never reach the queue that published.
      }
    }
    for (const channel of this.#subscribers) channel.tryWrite(sequenced);
  }

  /**
   * Call `observe` synchronously inside every {@linkcode publish}, before the subscribers: for
   * O(1) bookkeeping such as metric counters, which must see every event (a subscriber may drop
   * some) and must not slow the publishing queue (ADR-052), so it must not block or do I/O.
   * Whatever it throws is swallowed.
   *
   * @returns a function that removes the observer.
   */
  observe(observe: (event: SequencedEvent) => void): () => void {
    this.#observers.add(observe);
    return () => void this.#observers.delete(observe);
  }

  /**
   * Subscribe to events published from now on, and, with `after` (a client's `Last-Event-ID`),
   * get the ones published after it that the replay buffer still holds: taken in the same
   * synchronous step as the subscription, so nothing falls between the two or comes twice.
   *
   * @param capacity events buffered for this subscriber before the oldest is dropped.
   * @param onDropped receives each event evicted because this subscriber fell behind.
   * @param after the id (`<epoch>-<seq>`) of the last event the subscriber saw.
   */
  subscribe(
    capacity: number,
    onDropped?: (event: SequencedEvent) => void,
    after?: string,
  ): Subscription {
    const replay = after === undefined ? [] : this.#since(after);
    const channel = new BoundedChannel<SequencedEvent>({
      capacity,
      mode: "drop-oldest",
      name: "events subscriber",
      onDropped,
    });
    this.#subscribers.add(channel);
    return {
      channel,
      replay,
      close: () => {
        if (this.#subscribers.delete(channel)) this.#droppedByClosed += channel.stats().dropped;
        channel.complete();
      },
    };
  }

  // The buffered events after `id`, or null when the buffer cannot say what came after it.
  #since(id: string): SequencedEvent[] | null {
    const match = /^([0-9a-f]{8})-(\d{1,15})$/.exec(id.trim());
    if (!match || match[1] !== this.epoch) return null;
    const last = Number(match[2]);
    if (last > this.#seq) return null;
    // The oldest event still buffered must be the one right after `last`, or earlier.
    if (this.#seq - last > this.replayCapacity) return null;
    const events: SequencedEvent[] = [];
    for (let seq = last + 1; seq <= this.#seq; seq++) {
      events.push(this.#recent[seq % this.replayCapacity]!);
    }
    return events;
  }

  /** Complete every subscriber's channel (shutdown). */
  close(): void {
    for (const channel of this.#subscribers) {
      this.#droppedByClosed += channel.stats().dropped;
      channel.complete();
    }
    this.#subscribers.clear();
  }
}
