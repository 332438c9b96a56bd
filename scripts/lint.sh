#!/usr/bin/env bash
# lint.sh: go vet and gofmt over the whole module. Fails listing the files gofmt would change.
set -euo pipefail
cd "$(dirname "$0")/.."

go vet ./...

unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "lint: gofmt would change these files (gofmt -w FILE rewrites them):" >&2
	echo "$unformatted" >&2
	exit 1
fi
