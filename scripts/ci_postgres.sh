#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the test suite, or stop it.
#
#   eval "$(scripts/ci_postgres.sh)"     # start; exports AUTOTUNE_TEST_PG_URL and AUTOTUNE_TEST_PG_DIR
#   python -m pytest tests               # the store tests now also run against PostgreSQL
#   scripts/ci_postgres.sh stop          # stop the server and delete its directory
#
# Uses the PostgreSQL binaries on PATH or under /usr/lib/postgresql/*/bin; installs the `postgresql`
# package with apt-get when there are none (as root). The server listens on 127.0.0.1 on a free port,
# with trust authentication, in a temporary directory owned by an unprivileged user when run as root
# (PostgreSQL refuses to run as root). Only the export lines go to stdout; progress goes to stderr.
set -euo pipefail

log() { echo "ci_postgres: $*" >&2; }

find_bindir() {
    if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return; fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ]; then echo "$d"; return; fi
    done
}

as_owner() {  # run a command as the server's owner
    if [ "$(id -u)" -ne 0 ]; then "$@"; return; fi
    if command -v runuser >/dev/null 2>&1; then runuser -u "$OWNER" -- "$@"
    else su "$OWNER" -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

if [ "${1:-start}" = "stop" ]; then
    DIR="${AUTOTUNE_TEST_PG_DIR:?set AUTOTUNE_TEST_PG_DIR (printed by the start command)}"
    BINDIR="$(cat "$DIR/bindir")"
    OWNER="$(stat -c %U "$DIR")"
    as_owner "$BINDIR/pg_ctl" -D "$DIR/data" -m fast stop >&2 || log "server was not running"
    rm -rf "$DIR"
    log "stopped and removed $DIR"
    exit 0
fi

BINDIR="$(find_bindir || true)"
if [ -z "$BINDIR" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        log "no PostgreSQL found; install it (e.g. apt-get install postgresql) and run again"; exit 1
    fi
    log "installing PostgreSQL with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    BINDIR="$(find_bindir || true)"
    [ -n "$BINDIR" ] || { log "apt-get installed no initdb"; exit 1; }
fi

OWNER="$(id -un)"
if [ "$(id -u)" -eq 0 ]; then
    if id postgres >/dev/null 2>&1; then OWNER=postgres; else OWNER=nobody; fi
fi

DIR="$(mktemp -d "${TMPDIR:-/tmp}/autotune-pg.XXXXXX")"
echo "$BINDIR" > "$DIR/bindir"
chmod 755 "$DIR"
[ "$(id -u)" -eq 0 ] && chown "$OWNER" "$DIR"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

log "initdb in $DIR/data as $OWNER ($BINDIR)"
as_owner "$BINDIR/initdb" -D "$DIR/data" -U autotune --auth=trust -E UTF8 --no-instructions >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log" >&2; exit 1; }
log "starting on 127.0.0.1:$PORT"
as_owner "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/data/server.log" -w -t 60 \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >&2 \
    || { cat "$DIR/data/server.log" >&2; exit 1; }
as_owner "$BINDIR/createdb" -h 127.0.0.1 -p "$PORT" -U autotune autotune_test >&2

echo "export AUTOTUNE_TEST_PG_URL=postgresql+psycopg://autotune@127.0.0.1:$PORT/autotune_test"
echo "export AUTOTUNE_TEST_PG_DIR=$DIR"
