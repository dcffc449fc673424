/**
 * lib/embedded.ts against real servers: each test starts its own in a temp directory on a free
 * port (no DATABASE_URL needed), and one process-level test Ctrl-Cs a real worker.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { type EmbeddedServer, startEmbedded } from "../../lib/embedded.ts";
import { waitFor } from "../_db.ts";
import { collectJsonLines } from "../_worker.ts";
import { freePort, mkfifo } from "../_fs.ts";

/** A temp directory the `postgres` user can traverse (as root the server runs as that user). */
async function tempRoot(): Promise<string> {
  const root = await Deno.makeTempDir({ dir: "/tmp", prefix: "textstack-embedded-" });
  await Deno.chmod(root, 0o755);
  return root;
}

/** Process group and session of `pid`, from /proc/<pid>/stat (fields 5 and 6). */
async function groupOf(pid: number | "self"): Promise<{ pgid: number; sid: number }> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  // After "pid (comm)": state ppid pgrp session …; comm may hold spaces and parentheses.
  const [, , pgid, sid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pgid: Number(pgid), sid: Number(sid) };
}

/** As root, the `postgres` user's ids (the server runs as that user); else ourselves. */
async function serverUser(): Promise<{ uid?: number; gid?: number }> {
  if (Deno.uid() !== 0) return {};
  const id = async (flag: string) =>
    Number(new TextDecoder().decode(
      (await new Deno.Command("id", { args: [flag, "postgres"] })
        .output()).stdout,
    ));
  return { uid: await id("-u"), gid: await id("-g") };
}

async function postmasterPid(dir: string): Promise<number> {
  return Number((await Deno.readTextFile(`${dir}/postmaster.pid`)).split("\n")[0]);
}

/** Pids of the processes working in `dir`: every postgres process chdir()s into its data dir. */
async function serverProcesses(dir: string): Promise<number[]> {
  const real = await Deno.realPath(dir).catch(() => dir);
  const pids: number[] = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const cwd = await Deno.readLink(`/proc/${entry.name}/cwd`).catch(() => "");
    if (cwd === real || cwd === `${real} (deleted)`) pids.push(Number(entry.name));
  }
  return pids;
}

async function answers(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Whatever a failed test left behind: stop its servers (immediate shutdown) and delete `root`. */
async function cleanUp(root: string, servers: EmbeddedServer[]): Promise<void> {
  for (const server of servers) await server.stop();
  for await (const entry of Deno.readDir(root)) {
    for (const pid of await serverProcesses(`${root}/${entry.name}`)) {
      try {
        Deno.kill(pid, "SIGQUIT");
      } catch { /* already gone */ }
    }
  }
  await Deno.remove(root, { recursive: true });
}

Deno.test("startEmbedded() runs the server in its own session, out of our process group", async () => {
  const root = await tempRoot();
  const dir = `${root}/pg`;
  const servers: EmbeddedServer[] = [];
  try {
    const pg = await startEmbedded({ dir, port: freePort(), persistent: false });
    servers.push(pg);
    assert.ok(await answers(pg.url));
    const pid = await postmasterPid(dir);
    const server = await groupOf(pid);
    const self = await groupOf("self");
    // A terminal's Ctrl-C signals the foreground process group: the server must not be in ours.
    assert.notEqual(server.pgid, self.pgid);
    assert.notEqual(server.sid, self.sid);
    assert.equal(server.sid, pid, "the postmaster leads its own session");
  } finally {
    await cleanUp(root, servers);
  }
});

Deno.test("startEmbedded() on a running server's directory reuses it; the last stop() stops it", async () => {
  const root = await tempRoot();
  const dir = `${root}/pg`;
  const servers: EmbeddedServer[] = [];
  const notes: string[] = [];
  const onLog = (line: string) => notes.push(line);
  try {
    const first = await startEmbedded({ dir, port: freePort(), persistent: true, onLog });
    servers.push(first);
    const pid = await postmasterPid(dir);
    const second = await startEmbedded({ dir, port: freePort(), persistent: true, onLog });
    servers.push(second);
    assert.equal(second.url, first.url, "reused on the running server's port");
    assert.equal(await postmasterPid(dir), pid);
    assert.ok(notes.some((n) => n.startsWith("Reusing")), JSON.stringify(notes));

    const client = postgres(second.url, { max: 1, onnotice: () => {} });
    await client`select 1`;
    await first.stop();
    assert.ok(await answers(first.url), "left running for the other session");
    assert.equal(await postmasterPid(dir), pid);
    assert.ok(notes.some((n) => /running: 1 other client session/.test(n)), JSON.stringify(notes));

    await client.end({ timeout: 1 });
    await second.stop();
    await waitFor("the server to exit", async () => (await serverProcesses(dir)).length === 0);
    await assert.rejects(Deno.stat(`${dir}/postmaster.pid`), Deno.errors.NotFound);
    assert.ok(!(await answers(first.url)));
    await Promise.all([first.stop(), second.stop()]); // idempotent, never throws
  } finally {
    await cleanUp(root, servers);
  }
});

Deno.test("startEmbedded() starts despite a stale postmaster.pid naming a live unrelated process", async () => {
  const root = await tempRoot();
  const dir = `${root}/pg`;
  const servers: EmbeddedServer[] = [];
  const notes: string[] = [];
  const port = freePort();
  // As the server's own user: PostgreSQL treats a pid it may not signal as dead, so only such a
  // process makes the server itself refuse the stale file (our own processes, when not root).
  const sleeper = new Deno.Command("sleep", { args: ["30"], stdin: "null", ...await serverUser() })
    .spawn();
  try {
    const earlier = await startEmbedded({ dir, port, persistent: true });
    const lines = (await Deno.readTextFile(`${dir}/postmaster.pid`)).split("\n");
    await earlier.stop();
    await waitFor("the server to exit", async () => (await serverProcesses(dir)).length === 0);
    // What a container restart leaves: the old file, its pid now someone else's, alive.
    lines[0] = String(sleeper.pid);
    await Deno.writeTextFile(`${dir}/postmaster.pid`, lines.join("\n"));

    const pg = await startEmbedded({ dir, port, persistent: false, onLog: (l) => notes.push(l) });
    servers.push(pg);
    assert.ok(await answers(pg.url));
    assert.notEqual(await postmasterPid(dir), sleeper.pid);
    assert.ok(notes.some((n) => n.includes("stale postmaster.pid")), JSON.stringify(notes));
  } finally {
    sleeper.kill("SIGKILL");
    await sleeper.status;
    await cleanUp(root, servers);
  }
});

Deno.test("stop() of a throwaway server stops it even with a client connected and deletes its data", async () => {
  const root = await tempRoot();
  const dir = `${root}/pg`;
  const servers: EmbeddedServer[] = [];
  try {
    const pg = await startEmbedded({ dir, port: freePort(), persistent: false });
    servers.push(pg);
    const client = postgres(pg.url, { max: 1, onnotice: () => {} });
    await client`select 1`;
    await pg.stop();
    await client.end({ timeout: 1 });
    await assert.rejects(Deno.stat(dir), Deno.errors.NotFound);
    await assert.rejects(Deno.stat(`${dir}.log`), Deno.errors.NotFound);
    assert.ok(!(await answers(pg.url)));
  } finally {
    await cleanUp(root, servers);
  }
});

Deno.test("deno task start on a terminal's Ctrl-C (SIGINT to its process group) gives its job back, exits 0 and stops the server", async () => {
  const root = await tempRoot();
  const storage = `${root}/storage`;
  await Deno.mkdir(storage);
  // A job that runs until it is aborted: reading a FIFO nobody writes to.
  await mkfifo(`${storage}/stream.txt`);
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    DATA_DIR: root,
    STORAGE_DIR: storage,
    EMBEDDED_PG_PORT: String(freePort()),
    PORT: "0",
    INTERNAL_API_TOKEN: "test-token-0123456789abcdef",
    LOG_LEVEL: "info",
  };
  const denoDir = Deno.env.get("DENO_DIR");
  if (denoDir) env.DENO_DIR = denoDir;
  // `setsid` makes the worker lead its own process group, as a shell does for a foreground job;
  // clearEnv keeps our DATABASE_URL (set by tests/_run.ts) from reaching it. Through `deno task`,
  // the README's command, the worker gets the SIGINT twice: from the group and from the task
  // runner, which forwards it.
  const worker = new Deno.Command("setsid", {
    args: [Deno.execPath(), "task", "start"],
    cwd: new URL("../..", import.meta.url).pathname,
    clearEnv: true,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const logs: Record<string, unknown>[] = [];
  const output = Promise.all([
    collectJsonLines(worker.stdout, logs),
    collectJsonLines(worker.stderr, logs),
  ]);
  const find = (msg: string) => logs.find((l) => l.msg === msg);
  const dump = () => JSON.stringify(logs);
  let exited = false;
  const status = worker.status.finally(() => (exited = true));
  const until = (msg: string, timeoutMs = 30_000) =>
    waitFor(`log "${msg}"`, () => {
      if (exited && !find(msg)) throw new Error(`Worker exited before "${msg}": ${dump()}`);
      return find(msg);
    }, timeoutMs);
  try {
    await until("consumer started");
    // The API refuses FIFOs (they could block the queue), so insert the row as a test does; the
    // connection closes before the signal so that the worker is the server's last client.
    const db = postgres(`postgres://postgres:postgres@127.0.0.1:${env.EMBEDDED_PG_PORT}/postgres`, {
      max: 1,
      onnotice: () => {},
    });
    const [{ id }] = await db<{ id: string }[]>`
      insert into ingestion_jobs (source_path) values ('stream.txt') returning id`;
    await db.end({ timeout: 1 });
    await waitFor("job claimed", () => logs.some((l) => l.msg === "job claimed" && l.id === id));
    assert.ok((await serverProcesses(`${root}/pg`)).length > 0, "the check below can fail");

    const group = await groupOf(worker.pid);
    assert.equal(group.pgid, worker.pid, "the worker leads its own process group");
    assert.notEqual(group.pgid, (await groupOf("self")).pgid); // never signal our own group
    Deno.kill(-group.pgid, "SIGINT");
    const code = (await status).code;
    await output;

    // Had the server died with the worker's group, these would be the first signs.
    const failures = logs.filter((l) =>
      l.msg === "queue lock lost" || String(l.msg).startsWith("give-back failed")
    );
    assert.deepEqual(failures, []);
    assert.ok(logs.some((l) => l.msg === "job given back" && l.id === id), dump());
    assert.equal(find("shutdown complete")?.code, 0, dump());
    assert.equal(code, 0, dump());
    // The worker was the server's last client, so its exit stopped it.
    await waitFor(
      "the server to exit",
      async () => (await serverProcesses(`${root}/pg`)).length === 0,
    );
    await assert.rejects(Deno.stat(`${root}/pg/postmaster.pid`), Deno.errors.NotFound);
  } finally {
    if (!exited) worker.kill("SIGKILL");
    await status;
    await output.catch(() => {});
    await cleanUp(root, []);
  }
});

Deno.test("EmbeddedServer.restart() ends every session and brings the server back on its port", async () => {
  const root = await tempRoot();
  const servers: EmbeddedServer[] = [];
  try {
    const pg = await startEmbedded({ dir: `${root}/pg`, port: freePort(), persistent: false });
    servers.push(pg);
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      const [before] = await sql`select pg_postmaster_start_time() as t, pg_backend_pid() as pid`;
      const pidBefore = await postmasterPid(`${root}/pg`);
      await pg.restart();
      // The old session is gone; postgres.js reconnects to the new server on the same URL.
      const [after] = await sql`select pg_postmaster_start_time() as t, pg_backend_pid() as pid`;
      assert.ok(after.t > before.t, "a new postmaster");
      assert.notEqual(after.pid, before.pid);
      assert.notEqual(await postmasterPid(`${root}/pg`), pidBefore);
    } finally {
      await sql.end({ timeout: 1 });
    }
  } finally {
    await cleanUp(root, servers);
  }
});
