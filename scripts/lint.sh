#!/usr/bin/env bash
# lint.sh: go vet, gofmt and staticcheck over the whole module. Fails listing the files gofmt would
# change, or what staticcheck finds (staticcheck.conf files say which checks a directory leaves out, and why).
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
