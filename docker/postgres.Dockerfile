# PostgreSQL 15 from Debian's own package, for compose.yaml's trial (docs/docker.md): on the same
# Debian base as the worker's image, so it builds where only a Debian mirror is reachable.
ARG DEBIAN_IMAGE=debian:bookworm-slim
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres /var/lib/postgresql/data /run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
USER postgres
HEALTHCHECK --interval=2s --timeout=3s --start-period=30s --retries=3 \
    CMD ["pg_isready", "-q", "-h", "127.0.0.1"]
# SIGINT: PostgreSQL's fast shutdown (SIGTERM would wait for every client to disconnect).
STOPSIGNAL SIGINT
ENTRYPOINT ["postgres-entrypoint.sh"]
