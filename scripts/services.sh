#!/usr/bin/env bash
# Start what the full test suite needs, idempotently: the Docker daemon, the local base
# images, and a PostgreSQL server on loopback. Prints the variables tests read.
set -euo pipefail
cd "$(dirname "$0")/.."

# Docker daemon
if ! docker info >/dev/null 2>&1; then
  if command -v dockerd >/dev/null; then
    mkdir -p /var/log
    (dockerd >/var/log/arena-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  fi
fi
if docker info >/dev/null 2>&1; then
  .venv/bin/arena images bootstrap >&2 || echo "services: base image bootstrap failed" >&2
fi

# PostgreSQL on loopback, in a cluster of our own
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
PGDATA=${ARENA_PGDATA:-/var/tmp/arena-pg}
PGPORT=${ARENA_PGPORT:-55432}
if [[ -n "$PGBIN" ]]; then
  if ! "$PGBIN/pg_isready" -h 127.0.0.1 -p "$PGPORT" >/dev/null 2>&1; then
    if [[ ! -f $PGDATA/PG_VERSION ]]; then
      mkdir -p "$PGDATA"; chown postgres "$PGDATA"
      su postgres -c "$PGBIN/initdb -D $PGDATA -A trust -U postgres" >/dev/null
    fi
    su postgres -c "$PGBIN/pg_ctl -D $PGDATA -o '-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=300' -l $PGDATA/log -w start" >/dev/null
  fi
  su postgres -c "$PGBIN/psql -h 127.0.0.1 -p $PGPORT -U postgres -tc \"SELECT 1 FROM pg_database WHERE datname='arena_test'\"" | grep -q 1 \
    || su postgres -c "$PGBIN/createdb -h 127.0.0.1 -p $PGPORT -U postgres arena_test"
  echo "export ARENA_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:$PGPORT/arena_test"
fi
