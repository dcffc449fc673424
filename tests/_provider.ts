/**
 * A real local HTTP server (Deno.serve on 127.0.0.1:0) speaking the chat-completions API and
 * misbehaving as providers do, one scripted answer per request: rate limits with `Retry-After` or
 * `retry-after-ms`, 5xx, answers that never come, reasoning before the JSON, prose around a fence,
 * an event stream when none was asked for.
 *
 * @module
 */

/** How the server answers one request. */
export type ProviderAnswer =
  /** A chat.completion with this message content (and `usage`, when given). */
  | { kind: "content"; content: string; usage?: Record<string, number> }
  /** An error status with these headers and an OpenAI-style error body. */
  | { kind: "status"; status: number; headers?: Record<string, string>; message?: string }
  /** Headers, then nothing until the client goes away. */
  | { kind: "hold" }
  /** Not even headers until the client goes away. */
  | { kind: "silent" }
  /** `text/event-stream` of chat.completion.chunk deltas (the content in `parts`), then [DONE]. */
  | { kind: "sse"; parts: string[]; usage?: Record<string, number> };

/** One request as the server saw it. */
export interface ProviderRequest {
  /** performance.now() at arrival, ms. */
  at: number;
  key: string | null;
  /** The request body's `stream` field. */
  stream: unknown;
}

/** The running server. */
export interface Provider {
  /** Base URL for the client, e.g. `http://127.0.0.1:41234/v1`. */
  url: string;
  requests: ProviderRequest[];
  /** Requests whose client went away before the answer ended. */
  aborted(): number;
  close(): Promise<void>;
}

/**
 * Start the server: request n gets `script[n]`, the last answer repeating.
 *
 * @param script the answers in order (at least one).
 */
export function startProvider(script: ProviderAnswer[]): Provider {
  const requests: ProviderRequest[] = [];
  let aborted = 0;
  const encoder = new TextEncoder();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    if (new URL(req.url).pathname !== "/v1/chat/completions") {
      return new Response("not found", { status: 404 });
    }
    const body = await req.json();
    const n = requests.push({
      at: performance.now(),
      key: req.headers.get("idempotency-key"),
      stream: body.stream,
    });
    const answer = script[Math.min(n - 1, script.length - 1)];
    if (answer.kind === "status") {
      return Response.json(
        { error: { message: answer.message ?? `status ${answer.status}`, type: "test" } },
        { status: answer.status, headers: answer.headers },
      );
    }
    if (answer.kind === "silent") {
      await new Promise((resolve) => req.signal.addEventListener("abort", resolve, { once: true }));
      aborted++;
      return new Response(null, { status: 504 });
    }
    if (answer.kind === "hold") {
      let timer: ReturnType<typeof setInterval> | undefined;
      return new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            // A space every 20 ms: a client that went away makes the next write fail.
            timer = setInterval(() => {
              try {
                controller.enqueue(encoder.encode(" "));
              } catch { /* cancelled */ }
            }, 20);
          },
          cancel() {
            clearInterval(timer);
            aborted++;
          },
        }),
        { headers: { "content-type": "application/json" } },
      );
    }
    if (answer.kind === "sse") {
      const events = answer.parts.map((part, i) =>
        JSON.stringify({
          id: "chatcmpl-sse",
          object: "chat.completion.chunk",
          created: 0,
          model: "sse-model",
          choices: [{
            index: 0,
            delta: i === 0 ? { role: "assistant", content: part } : { content: part },
          }],
        })
      );
      if (answer.usage) {
        events.push(JSON.stringify({
          id: "chatcmpl-sse",
          object: "chat.completion.chunk",
          created: 0,
          model: "sse-model",
          choices: [],
          usage: answer.usage,
        }));
      }
      const text = events.map((e) => `data: ${e}\n\n`).join("") + "data: [DONE]\n\n";
      return new Response(text, { headers: { "content-type": "text/event-stream" } });
    }
    return Response.json({
      id: `chatcmpl-${n}`,
      object: "chat.completion",
      created: 0,
      model: "test-model",
      choices: [{
        index: 0,
        finish_reason: "stop",
        message: { role: "assistant", content: answer.content },
      }],
      ...(answer.usage ? { usage: answer.usage } : {}),
    });
  });
  const { port } = server.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    aborted: () => aborted,
    close: () => server.shutdown(),
  };
}
