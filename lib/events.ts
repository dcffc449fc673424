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
  | "retried";

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
  /** Stop receiving; the channel completes. */
  close(): void;
}

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
  #seq = 0;

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

  /** Publish a committed transition to every subscriber; never blocks, never throws. */
  publish(event: JobEvent): void {
    const sequenced = { ...event, seq: ++this.#seq };
    for (const channel of this.#subscribers) channel.tryWrite(sequenced);
  }

  /**
   * Subscribe to events published from now on.
   *
   * @param capacity events buffered for this subscriber before the oldest is dropped.
   * @param onDropped receives each event evicted because this subscriber fell behind.
   */
  subscribe(capacity: number, onDropped?: (event: SequencedEvent) => void): Subscription {
    const channel = new BoundedChannel<SequencedEvent>({
      capacity,
      mode: "drop-oldest",
      name: "events subscriber",
      onDropped,
    });
    this.#subscribers.add(channel);
    return {
      channel,
      close: () => {
        this.#subscribers.delete(channel);
        channel.complete();
      },
    };
  }

  /** Complete every subscriber's channel (shutdown). */
  close(): void {
    for (const channel of this.#subscribers) channel.complete();
    this.#subscribers.clear();
  }
}
