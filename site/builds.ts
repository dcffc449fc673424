/**
 * Builds of the static site and the atomic switch of the live one (after
 * Capistrano's `symlink:release` and `cleanup`).
 *
 * Layout, for `SITE_DIR=.data/site`:
 * - `.data/site` — a symlink, `site.builds/<name>` (relative, so the data directory can move);
 * - `.data/site.builds/<name>/` — one finished build per rebuild job (`<job id>`);
 * - `.data/site.builds/.tmp-<uuid>/` — a render in progress (removed if it does not finish).
 *
 * The switch makes a new symlink beside `SITE_DIR` and renames it over the live one: one
 * rename(2), so a reader sees the old tree or the new one, never a mix. A directory cannot be
 * swapped that way: rename(2) refuses to replace a non-empty directory, and Deno does not expose
 * `RENAME_EXCHANGE`. The previous build is kept; older ones are pruned.
 *
 * @module
 */
import { basename, dirname, join, resolve } from "node:path";

/** The directory holding every build of `siteDir`: its sibling `<name>.builds`. */
export function buildsDir(siteDir: string): string {
  return `${resolve(siteDir)}.builds`;
}

/**
 * The build `siteDir` points at now.
 *
 * @returns the build's directory name (e.g. `"17"`), or null when there is no live link.
 * @throws Error when `siteDir` exists but is not a symlink.
 */
export async function liveBuild(siteDir: string): Promise<string | null> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(siteDir);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  if (!info.isSymlink) {
    throw new Error(
      `Cannot switch the live site: SITE_DIR "${siteDir}" is not a symlink to a build; ` +
        `move it away (builds live in "${buildsDir(siteDir)}")`,
    );
  }
  return basename(await Deno.readLink(siteDir));
}

/**
 * Make a fresh, empty directory to render into, inside the builds directory (same file system
 * as the final build, so finishing it is a rename).
 *
 * @returns its absolute path.
 */
export async function startBuild(siteDir: string): Promise<string> {
  const dir = join(buildsDir(siteDir), `.tmp-${crypto.randomUUID()}`);
  await Deno.mkdir(dir, { recursive: true });
  return dir;
}

/**
 * Give a finished render its final name, `<name>` (or `<name>-2`, … when `<name>` is live, e.g. a
 * retried job whose earlier run already switched the site). A leftover of that name that is not
 * live is replaced.
 *
 * @param tmp the directory {@linkcode startBuild} made.
 * @returns the final directory name.
 */
export async function finishBuild(siteDir: string, tmp: string, name: string): Promise<string> {
  const live = await liveBuild(siteDir);
  let final = name;
  for (let n = 2; final === live; n++) final = `${name}-${n}`;
  const target = join(buildsDir(siteDir), final);
  await Deno.remove(target, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await Deno.rename(tmp, target);
  return final;
}

/**
 * Point `siteDir` at a finished build with one atomic rename of a fresh symlink over it.
 *
 * @param build the build's directory name in {@linkcode buildsDir}.
 * @returns the build that was live before, or null.
 * @throws Error when `siteDir` exists and is not a symlink (it is left untouched).
 */
export async function switchLive(siteDir: string, build: string): Promise<string | null> {
  const previous = await liveBuild(siteDir);
  const link = resolve(siteDir);
  const tmp = join(dirname(link), `.${basename(link)}.switch-${crypto.randomUUID()}`);
  await Deno.symlink(`${basename(link)}.builds/${build}`, tmp);
  try {
    await Deno.rename(tmp, link);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
  return previous;
}

/**
 * Delete every build and leftover render except those named in `keep`.
 *
 * @returns the removed entries' names.
 */
export async function pruneBuilds(siteDir: string, keep: ReadonlyArray<string>): Promise<string[]> {
  const removed: string[] = [];
  for await (const entry of Deno.readDir(buildsDir(siteDir))) {
    if (keep.includes(entry.name)) continue;
    await Deno.remove(join(buildsDir(siteDir), entry.name), { recursive: true });
    removed.push(entry.name);
  }
  return removed.sort();
}
