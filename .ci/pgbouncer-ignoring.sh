#!/usr/bin/env bash
# Starts a second pgbouncer (port 6433), in transaction mode and told to ignore startup
# options (`ignore_startup_parameters = options`, a common setting), and prints its URL
# (IDEM_PGBOUNCER_IGNORING_URL). It accepts the store's connections and drops the
# statement timeout they ask for: the store must notice at connect and refuse. Idempotent.
set -euo pipefail
exec "$(dirname "$0")/pgbouncer.sh" 6433 "ignore_startup_parameters = options"
