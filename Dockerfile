# TextStack edge worker: one Deno process. Set DATABASE_URL in production; without it the worker
# starts an embedded PostgreSQL under /app/.data (fine for a trial, not for a deploy).
FROM node:20-bookworm-slim

# Deno from the npm registry, pinned (the same install the README and CI use).
RUN npm install -g deno@2.9.6 && deno --version

WORKDIR /app
COPY deno.json deno.lock ./
COPY main.ts ./
COPY lib ./lib
COPY queues ./queues
COPY books ./books
COPY sql ./sql
# Fetch and cache every dependency at build time, so a container starts without the network.
RUN deno install --frozen && deno cache --frozen main.ts

ENV HOST=0.0.0.0 \
    PORT=8787 \
    STORAGE_DIR=/data/storage \
    DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8787

# The worker itself is PID 1 and handles SIGTERM (give back, then exit 0 within
# SHUTDOWN_BUDGET_MS); never wrap it in npm/npx, which drop the signal.
STOPSIGNAL SIGTERM
ENTRYPOINT ["deno", "run", "-A", "main.ts"]
