#!/usr/bin/env bash
# Starts pgbouncer on loopback (port 6432) in transaction pooling mode, as many
# deployments run it, in front of the PostgreSQL server of .ci/postgres.sh, and prints
# its URL (IDEM_PGBOUNCER_URL). The PostgreSQL store must refuse it at connect with a
# clear error. Installs pgbouncer from Debian's packages if missing. Idempotent.
# Arguments (for .ci/pgbouncer-ignoring.sh): the port, default 6432, and extra settings.
set -euo pipefail
port=${1:-6432}
extra=${2:-}
if ! command -v pgbouncer >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1
fi
dir=/tmp/idem-pgbouncer-$port
if ! pg_isready -q -h 127.0.0.1 -p "$port"; then
    mkdir -p "$dir"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
idem = host=127.0.0.1 port=5432 dbname=idem
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
auth_type = plain
auth_file = $dir/users.txt
pool_mode = transaction
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
$extra
INI
    echo '"idem" "idem"' >"$dir/users.txt"
    chown -R postgres "$dir"
    su postgres -c "pgbouncer -d $dir/pgbouncer.ini"
    for _ in $(seq 1 50); do
        pg_isready -q -h 127.0.0.1 -p "$port" && break
        sleep 0.2
    done
fi
echo "postgres://idem:idem@127.0.0.1:$port/idem"
