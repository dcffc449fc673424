/**
 * `receiveUpload` (lib/http/multipart.ts) on bodies a client cuts short: a dropped connection or a
 * truncated multipart body is a 400 for that request, the partial file removed, and never an
 * uncaught error (busboy destroys the open file part's stream with "Unexpected end of form"; an
 * error on a stream nobody listens to would end the whole worker).
 *
 * @module
 */
import assert from "node:assert/strict";
import { receiveUpload, UploadError } from "../../../lib/http/multipart.ts";

const BOUNDARY = "XXcutXX";
const HEAD = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="owner_id"\r\n\r\n7\r\n` +
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n` +
  `Content-Type: text/plain\r\n\r\n`;

function request(body: BodyInit): Request {
  return new Request("http://localhost/internal/user-books", {
    method: "POST",
    headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
    body,
  });
}

async function expectRefused(req: Request, storageDir: string, pattern: RegExp): Promise<void> {
  await assert.rejects(receiveUpload(req, storageDir, 1024 * 1024), (err: unknown) => {
    assert.ok(err instanceof UploadError, String(err));
    assert.equal(err.status, 400);
    assert.match(err.message, pattern);
    return true;
  });
  // Let busboy's deferred stream callbacks run: an unhandled error would surface here.
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual([...Deno.readDirSync(`${storageDir}/uploads`)], [], "partial file removed");
}

Deno.test("receiveUpload: a body that ends inside the file part is a 400, no file left", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await expectRefused(request(`${HEAD}hello, half a boo`), dir, /Unexpected end of form/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("receiveUpload: a connection dropped mid-file is a 400, no file left", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`${HEAD}${"x".repeat(10_000)}`));
        setTimeout(() => controller.error(new Error("connection reset")), 20);
      },
    });
    await expectRefused(request(body), dir, /Cannot read the multipart body/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("receiveUpload: a field sent twice is a 400 naming it, whichever field and order, no file left", async () => {
  // Which of two owner_id values is meant cannot be known: refused, as a second file is.
  const part = (name: string, value: string) =>
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  const file =
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n` +
    `Content-Type: text/plain\r\n\r\nOnce upon a time.\r\n`;
  for (const name of ["owner_id", "note", "x-y"]) {
    for (const order of [0, 1, 2]) {
      const parts = [part(name, "7"), part(name, "8")];
      parts.splice(order, 0, file);
      const dir = await Deno.makeTempDir();
      try {
        await expectRefused(
          request(`${parts.join("")}--${BOUNDARY}--\r\n`),
          dir,
          new RegExp(`second field "${name}"`),
        );
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }
  }
});

Deno.test("receiveUpload: the saved file keeps the extension that says how to read it, .txt.gz whole", async () => {
  const cases: Array<[string, string]> = [
    ["1342-0.txt.gz", ".txt.gz"],
    ["Pride.HTML.GZ", ".html.gz"],
    ["1342-h.zip", ".zip"],
    ["book.epub", ".epub"],
    ["notes.gz", ".gz"],
    ["README", ""],
  ];
  for (const [filename, kept] of cases) {
    const dir = await Deno.makeTempDir();
    try {
      const body = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; ` +
        `filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\nbytes\r\n` +
        `--${BOUNDARY}--\r\n`;
      const upload = await receiveUpload(request(body), dir, 1024 * 1024);
      assert.match(upload.sourcePath, /^uploads\/[0-9a-f-]{36}/, filename);
      assert.equal(upload.sourcePath.slice("uploads/".length + 36), kept, filename);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
