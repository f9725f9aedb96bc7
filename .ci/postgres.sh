#!/usr/bin/env bash
# Starts a PostgreSQL server on loopback for the PostgreSQL store's tests and prints the
# URL to use (IDEM_PG_URL). Installs the server from Debian's packages if it is missing.
# Idempotent: a running cluster is reused. Arguments (for .ci/postgres-skewed.sh): the
# cluster's name and port, default `main` on 5432.
set -euo pipefail
cluster=${1:-main}
port=${2:-5432}
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | grep -q "^$version $cluster "; then
    pg_createcluster "$version" "$cluster" -p "$port" >/dev/null
fi
pg_ctlcluster "$version" "$cluster" start >/dev/null 2>&1 || true
for _ in $(seq 1 50); do
    pg_isready -q -h 127.0.0.1 -p "$port" && break
    sleep 0.2
done
pg_isready -q -h 127.0.0.1 -p "$port"
su postgres -c "psql -p $port -q -v ON_ERROR_STOP=1" >/dev/null <<'SQL'
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'idem') THEN
        CREATE ROLE idem LOGIN PASSWORD 'idem';
    END IF;
END $$;
SELECT 'CREATE DATABASE idem OWNER idem'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'idem')\gexec
SQL
# The TLS test needs the server to speak TLS: Debian's clusters do, with the snakeoil
# certificate of the ssl-cert package; make sure of it.
if [ "$(su postgres -c "psql -p $port -tAc 'SHOW ssl'")" != "on" ]; then
    [ -f /etc/ssl/certs/ssl-cert-snakeoil.pem ] || make-ssl-cert generate-default-snakeoil
    su postgres -c "psql -p $port -q -v ON_ERROR_STOP=1" >/dev/null <<'SQL'
ALTER SYSTEM SET ssl_cert_file = '/etc/ssl/certs/ssl-cert-snakeoil.pem';
ALTER SYSTEM SET ssl_key_file = '/etc/ssl/private/ssl-cert-snakeoil.key';
ALTER SYSTEM SET ssl = on;
SELECT pg_reload_conf();
SQL
fi
echo "postgres://idem:idem@127.0.0.1:$port/idem"
