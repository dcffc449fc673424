/**
 * System packages some tests need. On a machine without one, such a test is reported as ignored,
 * its name saying which package and how to install it; under `CI=true` it runs anyway and fails,
 * so CI (whose `.ci/run` installs every one of them) never passes by skipping.
 *
 * @module
 */

/** A system package a test needs, and how its presence is checked. */
export type Tool =
  | "chromium"
  | "pgbouncer"
  | "curl"
  | "jq"
  | "shellcheck"
  | "docker"
  | "postgresql-15";

const CHECK: Record<Tool, { path?: string; command?: string; install: string }> = {
  chromium: { path: "/usr/bin/chromium", install: "apt-get install chromium" },
  pgbouncer: { command: "pgbouncer", install: "apt-get install pgbouncer" },
  curl: { command: "curl", install: "apt-get install curl" },
  jq: { command: "jq", install: "apt-get install jq" },
  shellcheck: { command: "shellcheck", install: "apt-get install shellcheck" },
  docker: { command: "docker", install: "apt-get install docker.io debootstrap" },
  // tests/_pg_cluster.ts: pg_ctl; postgresql-15 depends on postgresql-client-15 (pg_basebackup).
  "postgresql-15": {
    path: "/usr/lib/postgresql/15/bin/pg_ctl",
    install: "apt-get install postgresql-15",
  },
};

function present(tool: Tool): boolean {
  const { path, command } = CHECK[tool];
  try {
    if (path) return Deno.statSync(path).isFile;
    return new Deno.Command("sh", { args: ["-c", `command -v ${command}`], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Whether this run is CI's (`CI=true`), where a missing package fails instead of skipping. */
export const IN_CI = Deno.env.get("CI") === "true";

/**
 * The skip note for a test that needs `tools`, or null when it should run: every tool is present,
 * or this is CI.
 *
 * @returns e.g. `needs chromium, jq: apt-get install chromium; apt-get install jq`.
 */
export function skipNote(tools: readonly Tool[]): string | null {
  if (IN_CI) return null;
  const missing = tools.filter((tool) => !present(tool));
  if (missing.length === 0) return null;
  return `needs ${missing.join(", ")}: ${missing.map((t) => CHECK[t].install).join("; ")}`;
}

/**
 * `Deno.test` for a test that needs system packages: ignored with a note naming them where they
 * are missing (outside CI).
 */
export function toolTest(name: string, tools: readonly Tool[], fn: () => Promise<void>): void {
  const note = skipNote(tools);
  Deno.test({ name: note ? `${name} [skipped: ${note}]` : name, ignore: note !== null, fn });
}
