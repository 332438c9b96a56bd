#!/usr/bin/env bash
# soak.sh: the randomized, model-checked soak on the simulated fabric, with faults (`make soak` runs
# it; docs/soak.md explains what it checks).
#
#   scripts/soak.sh [afm-soak flags...]      e.g. --ops 10000 --engines sqlite --seed 42 --faults all
#
# Installs what it needs as scripts/test.sh does, then runs `go run ./e2e/cmd/afm-soak`, which starts
# PostgreSQL and MariaDB servers of its own (scripts/test-env.sh, in its work directory: the database
# restart fault restarts them). Ends with one line per engine,
#   soak <engine>: N operations, F faults, C checks, V violations, seed S
# and exits 1 when an engine had a violation. Runs as root (see scripts/test-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/sbin:/sbin # opensm, ibsim

bash scripts/test-env.sh install
go run ./e2e/cmd/afm-soak "$@"
