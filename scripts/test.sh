#!/usr/bin/env bash
# test.sh: every check CI makes (`make test` runs it; CI runs `make test`).
#
#   1. install what the suites need (scripts/test-env.sh install: PostgreSQL, MariaDB, Galera, OpenSM, ibsim,
#      promtool, systemd-analyze, docker.io, debootstrap and curl for the image, gcc for sqlc)
#   2. start a throwaway PostgreSQL, MariaDB and three-node MariaDB Galera cluster, and a private dockerd
#      (scripts/docker-env.sh), each stopped again however this script ends
#   3. go vet, gofmt, staticcheck and function lengths (scripts/lint.sh); db/ against its sources (sqlc diff, as
#      make verify runs it); the deployment files (scripts/check-deploy.sh: promtool check and test
#      rules, systemd-analyze verify and security)
#   4. the release (scripts/release-test.sh build: make release VERSION=v0.0.0-ci, the base images
#      made locally, no registry): its image is the one every later step runs, built once
#   5. every test of every package, with AFM_TEST_REQUIRE_ALL=1: a suite whose server is missing
#      fails instead of skipping (the OpenSM driver tests run the image's OpenSM on that dockerd)
#   6. the image's smoke test on a simulated fabric, for each OpenSM driver (scripts/image-smoke.sh),
#      then the release's artifacts (scripts/release-test.sh check: checksums, ELF, SBOM, the image
#      archive, the .deb installed and purged in Debian 12, reproducibility)
#   7. a smoke run of the benchmark suite (cmd/afm-bench --smoke: every measurement, tiny sizes)
#   8. a short soak (e2e/cmd/afm-soak, docs/soak.md): SOAK_OPS (default 40) random requests with faults
#      per engine, with the hostile tenant's faults, checked against the model and the real pkey
#      tables, with seed 1, then a random seed; each time also on PostgreSQL and MariaDB with three
#      managers and the leader killed (SOAK_HA_OPS, default 24, operations for seed 1); then once
#      on a Galera cluster with every fault of the database, the sweep, the pkey tables and the backups;
#      and once on SQLite with one manager on two simulated fabrics (--fabrics 2)
#   9. a short fuzz smoke: each fuzz target the packages define, FUZZTIME (default 100000x) each
#
# Runs as root (the servers run as their own users; see scripts/test-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# An execution count, not a duration: with a duration Go's fuzz coordinator (go1.26) can race its
# own deadline and fail a target with a bare "context deadline exceeded" and no failing input
# (go.dev/issue/75804). A count has no deadline to race; a real finding still fails the run.
FUZZTIME=${FUZZTIME:-100000x}
SOAK_OPS=${SOAK_OPS:-40}

# OpenSM, ibsim and infiniband-diags live in /usr/sbin, which not every root PATH has.
export PATH=$PATH:/usr/sbin:/sbin

bash scripts/test-env.sh install
bash scripts/test-env.sh install docker.io debootstrap curl # the image's tests
bash scripts/test-env.sh install gcc libc6-dev # sqlc builds with cgo (scripts/sqlc.sh installs it)

# Under /tmp rather than $TMPDIR: the database servers' own users must be able to reach it.
env_dir=$(mktemp -d /tmp/afm-test-env.XXXXXX)
docker_dir=$(mktemp -d /tmp/afm-containers-ci.XXXXXX)
release_dir=$(mktemp -d /tmp/afm-release-ci.XXXXXX)
cleanup() {
	rm -rf "$release_dir"
	bash scripts/docker-env.sh stop "$docker_dir" || true
	rm -rf "$docker_dir"
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
export AFM_TEST_REQUIRE_ALL=1

bash scripts/lint.sh
bash scripts/sqlc.sh diff
bash scripts/check-deploy.sh

# The image, built once, by the release (docs/releasing.md), whose artifacts are checked below: the
# driver tests (internal/smcontainer) run its OpenSM, and the image's smoke test (below) runs it whole.
bash scripts/docker-env.sh start "$docker_dir"
bash scripts/docker-env.sh images "$docker_dir"
bash scripts/release-test.sh build "$docker_dir" "$release_dir"
export AFM_TEST_DOCKER_HOST=unix://$docker_dir/docker.sock AFM_TEST_DOCKER_IMAGE=alternative-fabric-manager

# Two packages at a time: the machine has two cores, and the database suites share two servers.
# Verbose output goes to a log; what is printed is each package's result, every failure, and how
# many tests each engine-parameterised suite (Test<Name>/<engine>/...) passed, so that the output
# shows the store, API and end-to-end suites running on all three engines.
test_log=$env_dir/go-test.log
status=0
go test -count=1 -p 2 -timeout 25m -v ./... >"$test_log" 2>&1 || status=$?
grep -E '^(ok|FAIL|panic:|---)|^\s+--- (FAIL|SKIP)|\.go:[0-9]+:' "$test_log" | grep -v '^--- PASS' || true
awk '$1 == "---" && $2 == "PASS:" {
	n = split($3, part, "/")
	if (n >= 2 && part[2] ~ /^(sqlite|postgres|mysql|galera)$/ && n == (part[1] == "TestStore" ? 3 : 2))
		count[part[1] "/" part[2]]++
}
END { for (k in count) printf "engine suite %-40s %d passed\n", k, count[k] }' "$test_log" | sort
passed=$(grep -cE '^\s*--- PASS' "$test_log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$test_log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$test_log" || true)
echo "tests: $passed passed, $failed failed, $skipped skipped"
if ((status != 0)); then
	echo "go test failed (exit $status); what each failed test printed, then the last 60 lines of the log:" >&2
	awk -f scripts/failed-output.awk "$test_log" "$test_log" >&2 || true
	echo "=== the last 60 lines of the verbose log" >&2
	tail -n 60 "$test_log" >&2
	exit "$status"
fi
if ((skipped > 0)); then
	echo "tests were skipped: in CI nothing may be skipped" >&2
	exit 1
fi

# The image on a simulated fabric, for each OpenSM driver (see the script).
bash scripts/image-smoke.sh "$docker_dir"

# What make release wrote above, on the same engine (docs/releasing.md).
bash scripts/release-test.sh check "$docker_dir" "$release_dir"

# The benchmark suite with tiny sizes, so that it cannot rot: it fails only if a measurement
# cannot be made, never on a figure (make bench runs it at full size).
echo "benchmark smoke: BenchmarkApplyLargeFabric and BenchmarkApplyManyPorts once"
go test -run '^$' -bench 'ApplyLargeFabric|ApplyManyPorts' -benchtime 1x ./internal/applier >"$env_dir/bench-apply-smoke.txt"
echo "benchmark smoke: go run ./cmd/afm-bench --smoke"
go run ./cmd/afm-bench --smoke >"$env_dir/bench-smoke.md"

# The soak starts database servers of its own (its database restart fault must not touch the ones
# above). Its default faults leave out the leader kill among several managers (docs/soak.md): a
# second run on the server engines has three managers with [ha] on one database, and kills the
# leader (each kill costs the soak's 3 s lease) or restarts the database under them. A last run,
# once, on a Galera cluster has a fault in every round, dealt in turn from the faults that reach a
# slow or partitioned database, writers on several nodes, a long sweep, a host OpenSM cannot
# program and a restore from a backup: each comes at least once in SOAK_GALERA_OPS (default 24).
# Both seeds' first run adds the hostile tenant's faults to the default ones (a host dropping
# OpenSM's Sets, a cloned GUID, a tenant's own OpenSM; the other tenants' jobs must complete) on
# every engine's deck; the schedule deals them first, in the first rounds, whatever the seed, so
# that every engine meets each of them however short the run, and pays the rounds it forced back
# from the later ones (a run keeps the rate's count of faults). Each holds for about 16 s, past the
# bound on an innocent job's wait: the three-manager runs have SOAK_HA_OPS (default 24) operations
# rather than SOAK_OPS (one restart-db and one kill-leader on each engine), which pays for what the
# hostile faults add, so that the soak's time stays about what it was (measured on 2 cores: seed
# 1's first run 38 s without them, 76 s with; its three-manager run 51 s at 40 operations, 27 s at
# 24; at a load of 20, a random seed's first run dealing them in their turn, one or two an engine,
# 193 s, and dealing each first 208 s).
soak_faults=kill-manager,stop-opensm,kill-opensm,link,edit-partitions,restart-db,db-latency,db-partition
soak_faults=$soak_faults,galera-writers,slow-sweep,pkey-errors,restore-db,drop-sets,clone-guid,tenant-sm
echo "soak: $SOAK_OPS operations per engine with the hostile tenant's faults, seed 1, then a random seed; after each, three managers, kill-leader"
for seed in 1 random; do
	go run ./e2e/cmd/afm-soak --ops "$SOAK_OPS" --seed "$seed" --faults "$soak_faults"
	go run ./e2e/cmd/afm-soak --ops "${SOAK_HA_OPS:-24}" --seed "$seed" --engines postgres,mysql --managers 3 \
		--faults kill-leader,restart-db
done
echo "soak: Galera, ${SOAK_GALERA_OPS:-24} operations, a fault in every round, a random seed"
go run ./e2e/cmd/afm-soak --ops "${SOAK_GALERA_OPS:-24}" --seed random --engines galera --fault-rate 100 \
	--faults db-latency,db-partition,galera-writers,slow-sweep,pkey-errors,restore-db
# Two fabrics, one manager: each fabric's OpenSM faults on that fabric only, while the other's jobs
# must complete; each fabric checked against its own model (docs/soak.md). About 30 s.
echo "soak: two fabrics on SQLite, $SOAK_OPS operations, a random seed"
go run ./e2e/cmd/afm-soak --ops "$SOAK_OPS" --seed random --engines sqlite --fabrics 2 --hosts 8 --fault-rate 60

# `go test -list` prints a package's matching names, then "ok  <package> <time>"; pair them up
# so that a new fuzz target is picked up without being named here.
fuzz_targets=$(go test -list '^Fuzz' ./... |
	awk '/^Fuzz/ { names[n++] = $1; next }
	     /^ok/   { for (i = 0; i < n; i++) print $2, names[i]; n = 0 }')
echo "fuzz smoke: $(grep -c . <<<"$fuzz_targets" || true) targets, $FUZZTIME each"
while read -r package target; do
	[[ -n $target ]] || continue
	# -fuzz takes one package and one target; -run '^$' keeps the unit tests from running again.
	# stdin is the list being read, so the test must not inherit it.
	go test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" "$package" </dev/null
done <<<"$fuzz_targets"
