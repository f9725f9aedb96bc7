#!/usr/bin/env bash
# Starts a second PostgreSQL server on loopback (port 5433) whose clock runs two days
# ahead of this machine's (libfaketime, from Debian's faketime package), and prints its
# URL (IDEM_PG_SKEWED_URL). The PostgreSQL store's time test runs against it: a lease
# must end on the database's clock, never on the client's. Idempotent.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ ! -d /usr/lib/x86_64-linux-gnu/faketime ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql faketime >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 | head -1)
if ! pg_lsclusters -h | grep -q "^$version skewed"; then
    pg_createcluster "$version" skewed -p 5433 >/dev/null
    env_file="/etc/postgresql/$version/skewed/environment"
    {
        echo "LD_PRELOAD = '$lib'"
        echo "FAKETIME = '+2d'"
        echo "FAKETIME_DONT_RESET = '1'"
    } >>"$env_file"
fi
pg_ctlcluster "$version" skewed start >/dev/null 2>&1 || true
for _ in $(seq 1 50); do
    pg_isready -q -h 127.0.0.1 -p 5433 && break
    sleep 0.2
done
pg_isready -q -h 127.0.0.1 -p 5433
su postgres -c "psql -p 5433 -q -v ON_ERROR_STOP=1" >/dev/null <<'SQL'
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'idem') THEN
        CREATE ROLE idem LOGIN PASSWORD 'idem';
    END IF;
END $$;
SELECT 'CREATE DATABASE idem OWNER idem'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'idem')\gexec
SQL
echo "postgres://idem:idem@127.0.0.1:5433/idem"
