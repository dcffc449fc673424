/**
 * tools/image.ts's reading of the Dockerfiles and of apt's sources: which base images to make
 * sure of, which Debian suite each stands for, and which mirror debootstrap uses.
 *
 * @module
 */
import assert from "node:assert/strict";
import { aptMirror, baseImages, debianSuite } from "../../tools/image.ts";

const ROOT = new URL("../../", import.meta.url);

Deno.test("baseImages(): the Dockerfiles name one base, a Debian suite debootstrap can build", async () => {
  for (const file of ["Dockerfile", "docker/postgres.Dockerfile"]) {
    const bases = baseImages(await Deno.readTextFile(new URL(file, ROOT)));
    assert.deepEqual(bases, ["debian:bookworm-slim"], file);
    assert.equal(debianSuite(bases[0]), "bookworm");
  }
});

Deno.test("baseImages(): ARG defaults are substituted, stage names and repeats are not bases", () => {
  const text = [
    "ARG A=debian:trixie-slim",
    'ARG B="debian:bookworm"',
    "FROM ${A} AS build",
    "FROM --platform=linux/amd64 $B AS second",
    "FROM build",
    "FROM ${A}",
    "FROM scratch",
  ].join("\n");
  assert.deepEqual(baseImages(text), ["debian:trixie-slim", "debian:bookworm", "scratch"]);
  assert.throws(() => baseImages("FROM ${NOPE}"), /ARG NOPE has no default/);
});

Deno.test("debianSuite(): only Debian's own images, slim or not", () => {
  for (
    const [image, suite] of [
      ["debian:bookworm-slim", "bookworm"],
      ["debian:bookworm", "bookworm"],
      ["docker.io/library/debian:trixie-slim", "trixie"],
      ["node:20-bookworm-slim", undefined],
      ["debian:12", undefined],
      ["ubuntu:noble", undefined],
    ] as const
  ) {
    assert.equal(debianSuite(image), suite, image);
  }
});

Deno.test("aptMirror(): the first non-security mirror, deb822 or one-line", () => {
  const deb822 = [
    "Types: deb",
    "URIs: http://deb.debian.org/debian-security",
    "Suites: bookworm-security",
    "",
    "Types: deb",
    "URIs: http://mirror.example/debian",
    "Suites: bookworm bookworm-updates",
  ].join("\n");
  assert.equal(aptMirror([deb822]), "http://mirror.example/debian");
  const oneLine = [
    "deb http://security.debian.org/debian-security bookworm-security main",
    "deb [arch=amd64] http://ftp.example/debian bookworm main",
  ].join("\n");
  assert.equal(aptMirror([oneLine]), "http://ftp.example/debian");
  assert.equal(aptMirror(["", "# nothing"]), undefined);
});
