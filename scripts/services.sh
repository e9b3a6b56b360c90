#!/usr/bin/env bash
# Start what the full test suite needs, idempotently: the Docker daemon, the local base
# images, and a PostgreSQL server on loopback. Prints the variables tests read.
set -euo pipefail
cd "$(dirname "$0")/.."

# Docker daemon. When this script starts it, and as root with loop devices and xfsprogs,
# its data root is a loop-mounted XFS with project quotas (a sparse file, grown as used),
# so that overlay2 can cap each container's disk (storage_opt size); on ext4 it cannot,
# and the sandbox puts each container's writable layer on a disk of its own instead
# (sandbox/docker_disk.py), which bounds it as well. Opt in with ARENA_DOCKER_XFS=1: the
# default keeps the engine's data root (the XFS path has not run on a kernel that
# accepts prjquota yet, so CI does not depend on it).
docker_xfs_root() {
  local img=${ARENA_DOCKER_XFS_IMG:-/var/lib/arena-docker.xfs}
  local root=${ARENA_DOCKER_XFS_ROOT:-/var/lib/arena-docker}
  [[ "${ARENA_DOCKER_XFS:-0}" == 1 && $EUID == 0 && -e /dev/loop-control ]] || return 1
  command -v mkfs.xfs >/dev/null || return 1
  if ! mountpoint -q "$root"; then
    if [[ ! -f $img ]]; then
      truncate -s "${ARENA_DOCKER_XFS_SIZE:-64G}" "$img.tmp" && mkfs.xfs -q "$img.tmp" \
        && mv "$img.tmp" "$img" || { rm -f "$img.tmp"; return 1; }
    fi
    mkdir -p "$root"
    # a kernel without XFS quota support refuses prjquota: the default data root then
    mount -o loop,prjquota "$img" "$root" 2>/dev/null || { rm -f "$img"; return 1; }
  fi
  echo "$root"
}
if ! docker info >/dev/null 2>&1; then
  if command -v dockerd >/dev/null; then
    mkdir -p /var/log
    dockerd_args=()
    if data_root=$(docker_xfs_root); then
      dockerd_args+=(--data-root "$data_root")
      echo "services: dockerd data root $data_root (xfs, prjquota: storage_opt works)" >&2
    fi
    (dockerd "${dockerd_args[@]}" >/var/log/arena-dockerd.log 2>&1 &)
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
