#!/usr/bin/env bash
# Starts the cluster harness's own PostgreSQL server on loopback (port 5434) and prints
# its URL (IDEM_CLUSTER_PG_URL): the harness restarts it on purpose (fast and immediate
# modes), which must cut no other test's connections. Idempotent.
set -euo pipefail
exec "$(dirname "$0")/postgres.sh" harness 5434
