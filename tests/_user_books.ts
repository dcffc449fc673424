/**
 * Shared setup for the user ingestion and enrichment tests: contexts on a test schema, rows, a
 * small EPUB, and a real local HTTP server that speaks the chat-completions API and counts
 * requests (how many, with which idempotency keys, how many at once).
 *
 * @module
 */
import { strToU8, type Zippable, zipSync } from "fflate";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import type { UserIngestionContext, UserIngestionJobRow } from "../queues/user_ingestion/mod.ts";
import type { EnrichmentContext } from "../queues/enrichment/mod.ts";
import { type RemoteSettings } from "../queues/enrichment/_remote.ts";
import { remoteEngine } from "../queues/enrichment/mod.ts";
import type { TestDb } from "./_db.ts";
import { connect } from "../lib/db.ts";
import { Consumer } from "../lib/consumer.ts";
import { type ClaimedJob, type Queue, type QueueContext } from "../lib/queue.ts";
import { QueueLock } from "../lib/lock.ts";
import { Wake } from "../lib/wake.ts";
import { listenForWakes } from "../lib/listener.ts";

/** A user ingestion context bound to `db`, with a fresh storage directory. */
export async function userIngestionContext(
  db: TestDb,
  options: { bootId?: string; staleAfterMs?: number; storageDir?: string } = {},
): Promise<UserIngestionContext & { events: EventHub }> {
  return {
    sql: db.sql,
    log: createLogger(Deno.env.get("TEST_LOG_LEVEL") ?? "silent"),
    bootId: options.bootId ?? crypto.randomUUID(),
    events: new EventHub(),
    storageDir: options.storageDir ?? await Deno.makeTempDir({ prefix: "textstack-uploads-" }),
    staleAfterMs: options.staleAfterMs ?? 120_000,
  };
}

/** An enrichment context bound to `db`; remote engine when `remote` is given. */
export function enrichmentContext(
  db: TestDb,
  options: { bootId?: string; staleAfterMs?: number; remote?: RemoteSettings } = {},
): EnrichmentContext & { events: EventHub } {
  return {
    sql: db.sql,
    log: createLogger(Deno.env.get("TEST_LOG_LEVEL") ?? "silent"),
    bootId: options.bootId ?? crypto.randomUUID(),
    events: new EventHub(),
    staleAfterMs: options.staleAfterMs ?? 600_000,
    remote: remoteEngine(options.remote ?? null),
  };
}

/** Insert a user book and its Queued job directly; returns both ids. */
export async function insertUserBook(
  db: TestDb,
  sourcePath: string,
  ownerId = 7,
): Promise<{ bookId: string; jobId: string }> {
  const [book] = await db.sql<{ id: string }[]>`
    insert into user_books (owner_id) values (${ownerId}) returning id`;
  const [job] = await db.sql<{ id: string }[]>`
    insert into user_ingestion_jobs (user_book_id, source_path)
    values (${book.id}, ${sourcePath}) returning id`;
  return { bookId: book.id, jobId: job.id };
}

/** Insert a Ready user book with chapters and its enrichment Pending; returns its id. */
export async function insertReadyBook(db: TestDb, chapters: string[]): Promise<string> {
  const [book] = await db.sql<{ id: string }[]>`
    insert into user_books (owner_id, title, author, format, status, metadata_enrichment_status)
    values (7, 'The Test Book', 'Ada Tester', 'text', 'Ready', 'Pending') returning id`;
  for (const [i, html] of chapters.entries()) {
    await db.sql`
      insert into user_chapters (user_book_id, position, title, html)
      values (${book.id}, ${i + 1}, ${`Chapter ${i + 1}`}, ${html})`;
  }
  return book.id;
}

/** A user book row with its enrichment columns. */
export interface BookState {
  status: string;
  error: string | null;
  title: string | null;
  metadata_enrichment_status: string | null;
  metadata_enrichment_attempt_count: number;
  metadata_enrichment_error: string | null;
  metadata_enrichment_claimed_by: string | null;
  metadata: Record<string, unknown> | null;
}

/** Read a user book row. */
export async function bookRow(db: TestDb, id: string): Promise<BookState> {
  const [row] = await db.sql<BookState[]>`select * from user_books where id = ${id}`;
  return row;
}

/** Read a user ingestion job row. */
export async function userJobRow(db: TestDb, id: string): Promise<UserIngestionJobRow> {
  const [row] = await db.sql<UserIngestionJobRow[]>`
    select * from user_ingestion_jobs where id = ${id}`;
  return row;
}

/** English prose, long enough for franc and the keyword count. */
export const ENGLISH = [
  "<p>The old lighthouse keeper climbed the stairs every evening. The lighthouse stood on the",
  "rocks above the harbour, and the keeper knew every stone of it. Ships passed in the night and",
  "the light turned slowly over the water. The keeper wrote the names of the ships in a book.</p>",
].join(" ");

const CONTAINER = `<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>`;

const OPF = `<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="uid">urn:uuid:0b5c7d1e-0000-4000-8000-000000000007</dc:identifier>
    <dc:title>The Lighthouse</dc:title>
    <dc:creator>Ada Writer</dc:creator>
  </metadata>
  <manifest>
    <item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>
    <item id="c2" href="c2.xhtml" media-type="application/xhtml+xml"/>
  </manifest>
  <spine><itemref idref="c1"/><itemref idref="c2"/></spine>
</package>`;

function page(title: string, body: string): string {
  return `<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>${title}</title></head>
<body><h1>${title}</h1>${body}</body></html>`;
}

/**
 * A two-chapter EPUB, optionally with a `META-INF/encryption.xml` listing `OEBPS/c1.xhtml` under
 * `algorithm`.
 */
export function epubBytes(encryption?: { algorithm: string; uri?: string }): Uint8Array {
  const files: Zippable = {
    mimetype: [strToU8("application/epub+zip"), { level: 0 }],
    "META-INF/container.xml": strToU8(CONTAINER),
    "OEBPS/content.opf": strToU8(OPF),
    "OEBPS/c1.xhtml": strToU8(page("Evening", ENGLISH)),
    "OEBPS/c2.xhtml": strToU8(page("Night", ENGLISH)),
  };
  if (encryption) {
    files["META-INF/encryption.xml"] = strToU8(`<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
    xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="${encryption.algorithm}"/>
    <enc:CipherData><enc:CipherReference URI="${
      encryption.uri ?? "OEBPS/c1.xhtml"
    }"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>`);
  }
  return zipSync(files);
}

/** The DRM algorithm of a typical Adobe ADEPT book (AES-128-CBC). */
export const AES128 = "http://www.w3.org/2001/04/xmlenc#aes128-cbc";

/**
 * An Idempotency-Key without its intent: `book-<id>-<uuid>-attempt-<n>` → `book-<id>-attempt-<n>`.
 */
export function stripIntent(key: string): string {
  return key.replace(/^(book-\d+)-[0-9a-f-]{36}(-attempt-\d+)$/, "$1$2");
}

/** How the fake chat server answers the next requests. */
export type ChatMode = "answer" | "fenced" | "malformed" | "hold" | "error500";

/** A real local HTTP server speaking the chat-completions API, counting what it is asked. */
export interface ChatServer {
  /** Base URL for `ENRICHMENT_API_URL`, e.g. `http://127.0.0.1:41234/v1`. */
  url: string;
  /** The Idempotency-Key of every request, in arrival order. */
  keys: string[];
  /** The Authorization header of every request. */
  auth: Array<string | null>;
  /** Requests open right now, and the most ever open at once. */
  inFlight(): number;
  maxInFlight(): number;
  /** Requests whose client went away before an answer (SIGTERM, SIGKILL, timeout). */
  aborted(): number;
  mode: ChatMode;
  /** Answer every held request now (mode "answer"). */
  releaseHeld(): void;
  close(): Promise<void>;
}

/** The answer the fake server gives in modes "answer" and "fenced". */
export const ANSWER = {
  summary: "A lighthouse keeper records the ships that pass his harbour.",
  genres: ["literary fiction"],
  audience: "adult",
  content_warnings: [],
};

/** Start the fake chat-completions server on a free port. */
export function startChatServer(mode: ChatMode = "answer"): ChatServer {
  const keys: string[] = [];
  const auth: Array<string | null> = [];
  let open = 0;
  let most = 0;
  let aborted = 0;
  const held = new Set<() => void>();
  const state = { mode };
  const completion = (content: string) =>
    JSON.stringify({
      id: `chatcmpl-${keys.length}`,
      object: "chat.completion",
      created: 0,
      model: "test-model",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content } }],
    });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    if (new URL(req.url).pathname !== "/v1/chat/completions") {
      return new Response("not found", { status: 404 });
    }
    keys.push(req.headers.get("idempotency-key") ?? "(none)");
    auth.push(req.headers.get("authorization"));
    await req.json();
    if (state.mode === "hold") {
      // Headers now, then a space every 20 ms (JSON allows leading whitespace): a client that
      // goes away makes the next write fail, which cancels this body — that is how a held call
      // sees its caller's abort or death.
      open++;
      most = Math.max(most, open);
      const encoder = new TextEncoder();
      let timer: ReturnType<typeof setInterval> | undefined;
      let done = false;
      const finish = () => {
        if (done) return false;
        done = true;
        clearInterval(timer);
        open--;
        return true;
      };
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          timer = setInterval(() => {
            try {
              controller.enqueue(encoder.encode(" "));
            } catch { /* cancelled */ }
          }, 20);
          const release = () => {
            held.delete(release);
            if (!finish()) return;
            controller.enqueue(encoder.encode(completion(JSON.stringify(ANSWER))));
            controller.close();
          };
          held.add(release);
        },
        cancel() {
          if (finish()) aborted++;
        },
      });
      return new Response(body, { headers: { "content-type": "application/json" } });
    }
    open++;
    most = Math.max(most, open);
    try {
      if (state.mode === "error500") {
        return Response.json({ error: { message: "upstream broke" } }, { status: 500 });
      }
      const content = state.mode === "malformed"
        ? "Here is a summary: a lighthouse."
        : state.mode === "fenced"
        ? "```json\n" + JSON.stringify(ANSWER, null, 2) + "\n```"
        : JSON.stringify(ANSWER);
      return new Response(completion(content), { headers: { "content-type": "application/json" } });
    } finally {
      open--;
    }
  });
  const { port } = server.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    keys,
    auth,
    inFlight: () => open,
    maxInFlight: () => most,
    aborted: () => aborted,
    get mode() {
      return state.mode;
    },
    set mode(next: ChatMode) {
      state.mode = next;
    },
    releaseHeld() {
      state.mode = "answer";
      for (const release of [...held]) release();
    },
    async close() {
      for (const release of [...held]) release();
      await server.shutdown();
    },
  };
}

/** A running in-process consumer of any queue, with its own listener connection. */
export interface RunningQueue {
  lock: QueueLock;
  /** Stop the consumer (budget in ms) and close the listener. */
  stop(budgetMs?: number): Promise<void>;
}

/** Start a queue's consumer the way main.ts does: lock, wake, listener, poll timer. */
export async function startQueueConsumer<J extends ClaimedJob, C extends QueueContext>(
  db: TestDb,
  queue: Queue<J, C>,
  ctx: C,
  options: { pollIntervalMs?: number; runTimeoutMs?: number } = {},
): Promise<RunningQueue> {
  const wake = new Wake(queue.name);
  const lock = new QueueLock({ url: db.url, schema: db.schema, queue: queue.name, log: ctx.log });
  const listenerSql = connect(db.url, { schema: db.schema, applicationName: "t-l", max: 1 });
  await listenForWakes(listenerSql, `${db.schema}.${queue.table}`, wake, ctx.log);
  const consumer = new Consumer({
    queue,
    ctx,
    lock,
    wake,
    pollIntervalMs: options.pollIntervalMs ?? 30_000,
    standbyRetryMs: 100,
    runTimeoutMs: options.runTimeoutMs ?? 60_000,
  });
  consumer.start();
  return {
    lock,
    async stop(budgetMs = 2000) {
      await consumer.stop(performance.now() + budgetMs);
      await listenerSql.end({ timeout: 1 });
    },
  };
}
