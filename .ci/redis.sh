#!/usr/bin/env bash
# Starts a Redis server on loopback (port 6379) for the Redis store's tests and prints the
# URL to use (IDEM_REDIS_URL). Installs redis-server from Debian's packages if it is
# missing (the tests also start servers of their own from that binary). The server keeps
# an append-only file synced on every write and never evicts keys, as the store requires.
# Idempotent: a server already answering on the port is reused.
set -euo pipefail
port=${1:-6379}
if ! command -v redis-server >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
    dir=$(mktemp -d /tmp/idem-redis-XXXXXX)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
        --appendonly yes --appendfsync always --save '' --maxmemory-policy noeviction \
        --logfile "$dir/redis.log" >/dev/null
fi
for _ in $(seq 1 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.2
done
redis-cli -p "$port" ping >/dev/null
echo "redis://127.0.0.1:$port"
