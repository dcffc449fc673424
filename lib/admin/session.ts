/**
 * The dashboard's sign-in sessions, held in this process's memory: a session is
 * a random id the server knows, so signing out ends it for good. A cookie that holds only an
 * expiry (the design before) cannot be revoked: the old cookie kept opening `/admin` until it
 * expired, 12 h after sign-in.
 *
 * The worker is one process per port (a standby is another process with its own sessions), so a
 * map is enough: a restart signs everyone out, as docs/operations.md says. The map is bounded: at most
 * {@linkcode MAX_SESSIONS} live sessions, the oldest dropped first when a sign-in needs the room.
 *
 * @module
 */

/** Most sessions held at once; a sign-in past it ends the oldest session. */
export const MAX_SESSIONS = 1000;

/**
 * Live sessions by id, each with its expiry.
 *
 * @example
 * const sessions = new SessionStore(12 * 3600 * 1000);
 * const id = sessions.create();
 * sessions.valid(id); // true
 * sessions.revoke(id);
 * sessions.valid(id); // false
 */
export class SessionStore {
  // Insertion order is creation order: the first entry is the oldest session.
  readonly #expiry = new Map<string, number>();
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;

  /**
   * @param ttlMs how long a session lasts from its sign-in, in ms.
   * @param max most sessions held at once (default {@linkcode MAX_SESSIONS}).
   * @param now the clock, in ms (`Date.now` unless a test injects one).
   */
  constructor(ttlMs: number, max = MAX_SESSIONS, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#max = max;
    this.#now = now;
  }

  /** Live sessions now (expired ones are dropped first). */
  get size(): number {
    this.#prune();
    return this.#expiry.size;
  }

  /**
   * Start a session.
   *
   * @returns its id: 32 random bytes as 64 hex digits, unguessable.
   */
  create(): string {
    this.#prune();
    while (this.#expiry.size >= this.#max) {
      this.#expiry.delete(this.#expiry.keys().next().value!);
    }
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    this.#expiry.set(id, this.#now() + this.#ttlMs);
    return id;
  }

  /** Whether `id` names a live session (not revoked, not expired). */
  valid(id: string | undefined): boolean {
    if (id === undefined) return false;
    const expiry = this.#expiry.get(id);
    if (expiry === undefined) return false;
    if (expiry > this.#now()) return true;
    this.#expiry.delete(id);
    return false;
  }

  /** End a session (sign-out); an unknown id is ignored. */
  revoke(id: string | undefined): void {
    if (id !== undefined) this.#expiry.delete(id);
  }

  #prune(): void {
    const now = this.#now();
    for (const [id, expiry] of this.#expiry) if (expiry <= now) this.#expiry.delete(id);
  }
}
