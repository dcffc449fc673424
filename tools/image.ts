/**
 * `deno task image`: build the worker's image, `textstack-worker:local` by default, with the
 * machine's Docker engine (BuildKit).
 *
 * The Dockerfile names its Debian bookworm base through `ARG` defaults (`debian:bookworm-slim`).
 * When that image is neither present nor pullable (no registry reachable), it is built first from
 * Debian's own packages — `debootstrap --variant=minbase <suite>` from the machine's apt mirror,
 * trimmed like Debian's slim images (no apt lists, docs, man pages or locales), then
 * `docker import` — and tagged with that same name, so the Dockerfile stays the one built
 * anywhere. A base already present is reused.
 *
 * Options:
 * - `--tag=NAME` the image to build (default `textstack-worker:local`).
 * - `--ca=FILE` a CA bundle for HTTPS inside the build (a re-signing proxy), passed as the BuildKit
 *   secret `ca`, never into a layer; default `/etc/ssl/certs/ca-certificates.crt` when it exists,
 *   `--ca=none` for none.
 * - `--no-cache` build every step again (`docker build --no-cache`).
 *
 * Environment: `DOCKER` the client (default `docker`), `DEBIAN_MIRROR` the mirror for debootstrap
 * (default: the first Debian mirror in /etc/apt, else http://deb.debian.org/debian).
 *
 * Prints the build's wall time and the image's size; exits 1 with the failing step named.
 *
 * @module
 */
import { parseArgs } from "node:util";

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
const HOST_CA = "/etc/ssl/certs/ca-certificates.crt";

/** The Docker client: `DOCKER` or `docker` on PATH. */
export function dockerClient(): string {
  return Deno.env.get("DOCKER") || "docker";
}

/** Run a command, inheriting stdio; `true` when it exited 0. */
async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const status = await new Deno.Command(cmd, { args, env, stdin: "null" }).spawn().status;
  return status.success;
}

/** Run a command quietly; its exit status and output. */
async function quiet(cmd: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const out = await new Deno.Command(cmd, {
      args,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    })
      .output();
    const text = new TextDecoder();
    return { ok: out.success, out: (text.decode(out.stdout) + text.decode(out.stderr)).trim() };
  } catch (err) {
    return { ok: false, out: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * The base images a Dockerfile's `FROM` lines name through `ARG` defaults, e.g.
 * `["debian:bookworm-slim"]`; `FROM` lines naming an image directly count too, stage names not.
 */
export function baseImages(dockerfile: string): string[] {
  const args = new Map<string, string>();
  const stages = new Set<string>();
  const bases = new Set<string>();
  for (const line of dockerfile.replace(/\\\n/g, " ").split("\n")) {
    const arg = line.match(/^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)/);
    if (arg) args.set(arg[1], arg[2].replace(/^"(.*)"$/, "$1"));
    const from = line.match(/^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?/i);
    if (!from) continue;
    const image = from[1].replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_, name) => {
      const value = args.get(name);
      if (value === undefined) throw new Error(`FROM ${from[1]}: ARG ${name} has no default`);
      return value;
    });
    if (!stages.has(image)) bases.add(image);
    if (from[2]) stages.add(from[2]);
  }
  return [...bases];
}

/** The Debian suite a base image name stands for: `debian:bookworm-slim` → `bookworm`. */
export function debianSuite(image: string): string | undefined {
  return image.match(/^(?:docker\.io\/)?(?:library\/)?debian:([a-z]+)(?:-slim)?$/)?.[1];
}

/**
 * The machine's Debian mirror: the first `URIs:` (deb822) or `deb` line of /etc/apt whose suite is
 * not a security suite.
 */
export function aptMirror(sources: string[]): string | undefined {
  for (const text of sources) {
    for (const stanza of text.split(/\n\s*\n/)) {
      const uris = stanza.match(/^URIs:\s*(\S+)/m)?.[1];
      const suites = stanza.match(/^Suites:\s*(.+)$/m)?.[1] ?? "";
      if (uris && !/-security\b/.test(suites) && !/-security\b/.test(uris)) return uris;
    }
    for (const line of text.split("\n")) {
      const deb = line.match(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/);
      if (deb && !/-security\b/.test(deb[1]) && !/-security\b/.test(deb[2])) return deb[1];
    }
  }
  return undefined;
}

async function machineMirror(): Promise<string> {
  const fromEnv = Deno.env.get("DEBIAN_MIRROR");
  if (fromEnv) return fromEnv;
  const texts: string[] = [];
  try {
    texts.push(await Deno.readTextFile("/etc/apt/sources.list"));
  } catch { /* deb822 sources only */ }
  try {
    for await (const entry of Deno.readDir("/etc/apt/sources.list.d")) {
      if (/\.(sources|list)$/.test(entry.name)) {
        texts.push(await Deno.readTextFile(`/etc/apt/sources.list.d/${entry.name}`));
      }
    }
  } catch { /* none */ }
  return aptMirror(texts) ?? "http://deb.debian.org/debian";
}

/** Trim a debootstrapped tree like Debian's slim images, and give it apt sources. */
async function trim(dir: string, suite: string, mirror: string): Promise<void> {
  const remove = [
    "var/cache/apt",
    "var/lib/apt/lists",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/groff",
    "usr/share/lintian",
  ];
  for (const path of remove) {
    await Deno.remove(`${dir}/${path}`, { recursive: true }).catch(() => {});
  }
  await Deno.mkdir(`${dir}/var/cache/apt/archives/partial`, { recursive: true });
  await Deno.mkdir(`${dir}/var/lib/apt/lists/partial`, { recursive: true });
  // Docs: the copyright files stay (as in the slim images).
  for await (const entry of Deno.readDir(`${dir}/usr/share/doc`)) {
    const pkg = `${dir}/usr/share/doc/${entry.name}`;
    if (!entry.isDirectory) continue;
    for await (const file of Deno.readDir(pkg)) {
      if (file.name !== "copyright") await Deno.remove(`${pkg}/${file.name}`, { recursive: true });
    }
  }
  // Later `apt-get install`s in the image leave these out too.
  await Deno.writeTextFile(
    `${dir}/etc/dpkg/dpkg.cfg.d/slim`,
    [
      "path-exclude /usr/share/doc/*",
      "path-include /usr/share/doc/*/copyright",
      "path-exclude /usr/share/man/*",
      "path-exclude /usr/share/info/*",
      "path-exclude /usr/share/locale/*",
      "path-exclude /usr/share/groff/*",
      "path-exclude /usr/share/lintian/*",
      "",
    ].join("\n"),
  );
  await Deno.writeTextFile(
    `${dir}/etc/apt/apt.conf.d/docker-clean`,
    'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb || true"; };\n' +
      'APT::Install-Recommends "false";\n',
  );
  const security = mirror.replace(/\/debian\/?$/, "/debian-security");
  await Deno.writeTextFile(
    `${dir}/etc/apt/sources.list`,
    `deb ${mirror} ${suite} main\ndeb ${mirror} ${suite}-updates main\n` +
      (security !== mirror ? `deb ${security} ${suite}-security main\n` : ""),
  );
}

/** Build `image` from Debian's packages (debootstrap, then `docker import`). */
async function debootstrapBase(docker: string, image: string, suite: string): Promise<void> {
  const mirror = await machineMirror();
  const dir = await Deno.makeTempDir({ prefix: "textstack-base-" });
  try {
    console.log(`== ${image}: not present and not pullable; debootstrap ${suite} from ${mirror}`);
    const started = performance.now();
    if (!(await run("debootstrap", ["--variant=minbase", suite, dir, mirror]))) {
      throw new Error(`debootstrap ${suite} failed (it needs root and the debootstrap package)`);
    }
    await trim(dir, suite, mirror);
    const tar = new Deno.Command("tar", { args: ["-C", dir, "-c", "."], stdout: "piped" }).spawn();
    const load = new Deno.Command(docker, {
      args: [
        "import",
        "--change",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change",
        'CMD ["bash"]',
        "-",
        image,
      ],
      stdin: "piped",
      stdout: "null",
    }).spawn();
    await tar.stdout.pipeTo(load.stdin);
    const [made, loaded] = await Promise.all([tar.status, load.status]);
    if (!made.success || !loaded.success) throw new Error(`docker import ${image} failed`);
    console.log(`== ${image}: built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Make sure every base image exists locally: present, pulled, or built from Debian's packages. */
export async function ensureBases(docker: string, bases: string[]): Promise<void> {
  for (const image of bases) {
    if ((await quiet(docker, ["image", "inspect", image])).ok) {
      console.log(`== ${image}: present`);
      continue;
    }
    const pull = await quiet(docker, ["pull", "-q", image]);
    if (pull.ok) {
      console.log(`== ${image}: pulled`);
      continue;
    }
    const suite = debianSuite(image);
    if (!suite) throw new Error(`Cannot pull ${image} (${pull.out}), nor build it from Debian`);
    await debootstrapBase(docker, image, suite);
  }
}

/** Image size in bytes, as `docker image inspect` reports it. */
export async function imageSize(docker: string, image: string): Promise<number> {
  const out = await quiet(docker, ["image", "inspect", "--format", "{{.Size}}", image]);
  if (!out.ok) throw new Error(`docker image inspect ${image}: ${out.out}`);
  return Number(out.out);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      tag: { type: "string", default: "textstack-worker:local" },
      ca: { type: "string" },
      "no-cache": { type: "boolean", default: false },
    },
  });
  const docker = dockerClient();
  try {
    const info = await quiet(docker, ["version", "--format", "{{.Server.Version}}"]);
    if (!info.ok) {
      throw new Error(`No Docker engine answers (${info.out}); install docker.io, start dockerd`);
    }
    // A client of Docker 23 or later builds with BuildKit only through the buildx plugin; an older
    // one (Debian's docker.io) has it built in.
    const client = await quiet(docker, ["version", "--format", "{{.Client.Version}}"]);
    const major = Number(client.out.match(/^(\d+)\./)?.[1] ?? 0);
    if (major >= 23 && !(await quiet(docker, ["buildx", "version"])).ok) {
      throw new Error(
        `The client "${docker}" (${client.out}) needs the buildx plugin for BuildKit: install ` +
          "it, or set DOCKER to a client with BuildKit built in (DOCKER=/usr/bin/docker from docker.io)",
      );
    }
    await ensureBases(docker, baseImages(await Deno.readTextFile(`${ROOT}/Dockerfile`)));
    let ca = values.ca;
    if (ca === undefined) {
      ca = await Deno.stat(HOST_CA).then(() => HOST_CA, () => "none");
    }
    const args = ["build", "--network", "host", "-t", values.tag];
    if (ca !== "none") args.push("--secret", `id=ca,src=${ca}`);
    if (values["no-cache"]) args.push("--no-cache");
    console.log(`== docker ${args.join(" ")} ${ROOT}`);
    const started = performance.now();
    if (!(await run(docker, [...args, ROOT], { DOCKER_BUILDKIT: "1" }))) {
      throw new Error(`docker build failed`);
    }
    const seconds = (performance.now() - started) / 1000;
    const size = await imageSize(docker, values.tag);
    console.log(
      `== ${values.tag}: built in ${seconds.toFixed(1)} s, ${(size / 1e6).toFixed(0)} MB`,
    );
  } catch (err) {
    console.error(`deno task image: ${err instanceof Error ? err.message : String(err)}`);
    Deno.exit(1);
  }
}
