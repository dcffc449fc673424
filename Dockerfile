# TextStack edge worker: one Deno process. Set DATABASE_URL in production; without it the worker
# starts an embedded PostgreSQL under /data (fine for a trial, not for a deploy). It needs a direct
# connection (or session pooling): LISTEN and session advisory locks fail through a
# transaction-mode pooler.
FROM node:20-bookworm-slim

# Deno from the npm registry, pinned (the same install the README and CI use).
RUN npm install -g deno@2.9.6 && deno --version

WORKDIR /app
# The dependency cache lives in the image, readable by the unprivileged user below.
ENV DENO_DIR=/app/.deno
COPY deno.json deno.lock ./
COPY main.ts ./
COPY lib ./lib
COPY queues ./queues
COPY books ./books
COPY site ./site
COPY sql ./sql
# Fetch and cache every dependency at build time, so a container starts without the network.
RUN deno install --frozen && deno cache --frozen main.ts books/extract_child.ts \
    && mkdir -p /data && chown -R node:node /app /data

ENV HOST=0.0.0.0 \
    PORT=8787 \
    STORAGE_DIR=/data/storage \
    DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8787

# Unprivileged: the image's `node` user (uid 1000) owns /app and /data.
USER node

# Readiness, not liveness: 503 while draining, deaf (listener probe missed) or without its queue
# lock, so whatever routes by health stops sending work; Docker itself restarts nothing for it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["deno", "eval", "const r = await fetch(`http://127.0.0.1:${Deno.env.get('PORT') ?? '8787'}/readyz`); Deno.exit(r.ok ? 0 : 1)"]

# The worker itself is PID 1 and handles SIGTERM (give back, then exit within
# SHUTDOWN_BUDGET_MS: 0 when every job was settled or given back, 3 when one was left in flight);
# never wrap it in npm/npx, which drop the signal.
STOPSIGNAL SIGTERM
# Young-generation semi-spaces of 4 MiB instead of V8's 16 MiB: the process runs two isolates (the
# main thread and the book-extraction worker), and this keeps a 10 MB book's ingest under 300 MB
# of RSS at no measurable cost in speed (README, "Book formats").
ENTRYPOINT ["deno", "run", "-A", "--v8-flags=--max-semi-space-size=4", "main.ts"]
