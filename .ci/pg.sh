#!/usr/bin/env bash
# Throwaway PostgreSQL for tests and benchmarks.
#
#   .ci/pg.sh start DIR [--durable]   initdb into DIR/data, start on a free
#                                     loopback port, create database aml_test,
#                                     print its postgres:// URL on stdout
#   .ci/pg.sh stop DIR                stop the server started in DIR
#
# The server listens on 127.0.0.1 only, trusts local connections (user aml,
# no password) and keeps its unix socket in DIR/sock. Without --durable it
# runs with fsync off (a test database is thrown away; what matters is
# speed); bench scripts pass --durable so the figures are those of a real
# server. initdb refuses to run as root, so as root the server runs as an
# unprivileged user: postgres when the Debian package created it, else a
# system user amlpg made here.
set -euo pipefail

die() { echo "pg.sh: $*" >&2; exit 1; }

bindir() {
  local d
  for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  return 1
}

# runas USER CMD...: run as USER when we are root, else as ourselves.
runas() {
  local u=$1; shift
  if [ "$(id -u)" -ne 0 ]; then "$@"; return; fi
  if command -v runuser >/dev/null 2>&1; then runuser -u "$u" -- "$@"; return; fi
  su -s /bin/sh "$u" -c "$(printf '%q ' "$@")"
}

pguser() {
  if [ "$(id -u)" -ne 0 ]; then id -un; return; fi
  if id postgres >/dev/null 2>&1; then echo postgres; return; fi
  if ! id amlpg >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin amlpg >/dev/null 2>&1 || die "cannot create user amlpg"
  fi
  echo amlpg
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local dir=$1 durable=${2:-}
  local bin user
  bin=$(bindir) || die "PostgreSQL binaries not found (apt-get install postgresql-15)"
  user=$(pguser)
  mkdir -p "$dir/data" "$dir/sock" "$dir/log"
  dir=$(cd "$dir" && pwd)
  if [ "$(id -u)" -eq 0 ]; then
    chown "$user" "$dir/data" "$dir/sock" "$dir/log"
    chmod 700 "$dir/data"
    # The server user must reach DIR's subfolders through DIR (and its
    # parents: a mktemp -d folder is 0700).
    local p=$dir
    while [ "$p" != / ]; do
      runas "$user" test -x "$p" || chmod o+x "$p"
      p=$(dirname "$p")
    done
  fi
  runas "$user" "$bin/initdb" -D "$dir/data" -U aml --auth=trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  local opts="-c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir/sock -c max_connections=200"
  if [ "$durable" != "--durable" ]; then
    opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  local port tries=0
  while :; do
    tries=$((tries + 1))
    [ $tries -le 20 ] || die "no free port found"
    port=$((20000 + (RANDOM % 30000)))
    port_free "$port" || continue
    if runas "$user" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log/server.log" -w -t 60 -o "$opts -c port=$port" start >/dev/null 2>&1; then
      break
    fi
    # Lost a race for the port (or a real failure: show it on the last try).
    [ $tries -lt 20 ] || { cat "$dir/log/server.log" >&2; die "server did not start"; }
  done
  echo "$port" >"$dir/port"
  echo "$user" >"$dir/user"
  runas "$user" "$bin/psql" -h 127.0.0.1 -p "$port" -U aml -d postgres -v ON_ERROR_STOP=1 -qc 'CREATE DATABASE aml_test' >/dev/null ||
    die "create database failed"
  echo "postgres://aml@127.0.0.1:$port/aml_test?sslmode=disable"
}

stop() {
  local dir=$1 bin user
  [ -f "$dir/data/postmaster.pid" ] || return 0
  bin=$(bindir) || return 0
  user=$(cat "$dir/user" 2>/dev/null || id -un)
  runas "$user" "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
    runas "$user" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: pg.sh start DIR [--durable]"; start "$2" "${3:-}" ;;
  stop) [ $# -ge 2 ] || die "usage: pg.sh stop DIR"; stop "$2" ;;
  *) die "usage: pg.sh start DIR [--durable] | stop DIR" ;;
esac
