#!/bin/sh
# compose.yaml's PostgreSQL: on first start, initialise $PGDATA with the superuser `postgres`
# whose password is POSTGRES_PASSWORD (password logins over TCP, scram-sha-256); then run the
# server in the foreground as PID 1, so `docker stop` reaches it directly.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is unset: the superuser needs a password}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U postgres -E UTF8 --locale=C.UTF-8 \
    --auth-local=peer --auth-host=scram-sha-256 --pwfile="$pwfile" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c port="${PGPORT:-5432}"
