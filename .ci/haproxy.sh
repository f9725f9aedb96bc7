#!/usr/bin/env bash
# Prints the path of haproxy (the load balancer the cluster harness puts in front of its
# checkout servers), installing it from Debian's packages if it is missing.
set -euo pipefail
if ! command -v haproxy >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null 2>&1
fi
command -v haproxy
