#!/usr/bin/env bash
# Starts a second PostgreSQL server on loopback (port 5433) whose clock runs two days
# ahead of this machine's (libfaketime, from Debian's faketime package), and prints its
# URL (IDEM_PG_SKEWED_URL). The PostgreSQL store's time test runs against it: a lease
# must end on the database's clock, never on the client's. Idempotent.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/*/faketime/libfaketime.so.1 \
    >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql faketime >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 | head -1)
if ! pg_lsclusters -h | grep -q "^$version skewed "; then
    pg_createcluster "$version" skewed -p 5433 >/dev/null
    # The cluster's environment file: every server process starts with the fake clock.
    {
        echo "LD_PRELOAD = '$lib'"
        echo "FAKETIME = '+2d'"
        echo "FAKETIME_DONT_RESET = '1'"
    } >>"/etc/postgresql/$version/skewed/environment"
fi
exec "$(dirname "$0")/postgres.sh" skewed 5433
