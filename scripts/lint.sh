#!/usr/bin/env bash
# lint.sh: go vet, gofmt, staticcheck and the length of functions over the whole module. Fails listing the
# files gofmt would change, what staticcheck finds (staticcheck.conf files say which checks a directory leaves
# out, and why), or the hand-written non-test functions over 80 lines (scripts/longfuncs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# staticcheck runs at this version with `go run`, which builds it once into the build cache: the
# module's go.mod does not carry a tool the manager never imports.
STATICCHECK_VERSION=v0.8.2

go vet ./...

unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "lint: gofmt would change these files (gofmt -w FILE rewrites them):" >&2
	echo "$unformatted" >&2
	exit 1
fi

go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...

# A function over 80 lines reads as several steps without their names: split it into named ones.
if ! long=$(bash scripts/longfuncs.sh); then
	echo "lint: hand-written functions over 80 lines (split each into named steps):" >&2
	echo "$long" >&2
	exit 1
fi
