#!/usr/bin/env bash
# bench.sh: the benchmark suite (`make bench` runs it; docs/performance.md explains the figures).
#
#   scripts/bench.sh [afm-bench flags...]
#
# Installs and starts throwaway PostgreSQL and MariaDB servers as scripts/test.sh does, runs
# `go run ./cmd/afm-bench` on all three engines and writes the Markdown table to
# docs/performance-table.md (BENCH_OUT overrides). Flags are passed on, e.g. --idle 10s.
# Takes several minutes. Runs as root (see scripts/test-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${BENCH_OUT:-docs/performance-table.md}
export PATH=$PATH:/usr/sbin:/sbin # opensm, ibsim

bash scripts/test-env.sh install

# Under /tmp rather than $TMPDIR: the database servers' own users must be able to reach it.
env_dir=$(mktemp -d /tmp/afm-bench-env.XXXXXX)
cleanup() {
	bash scripts/test-env.sh stop "$env_dir" || true
	rm -rf "$env_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

bash scripts/test-env.sh start "$env_dir"
set -a
# shellcheck source=/dev/null # written by test-env.sh start
. "$env_dir/env"
set +a

mkdir -p "$(dirname "$OUT")"
go run ./cmd/afm-bench --out "$OUT" "$@"
