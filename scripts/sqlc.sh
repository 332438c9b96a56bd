#!/usr/bin/env bash
# sqlc.sh ARGS...: runs sqlc at the version db/ is generated with, after installing it with
# `go install` when it is missing or another version (it builds with cgo: a few minutes, once).
set -euo pipefail
cd "$(dirname "$0")/.."

SQLC_VERSION=v1.31.1

gobin=$(go env GOBIN)
[[ -n $gobin ]] || gobin=$(go env GOPATH)/bin
sqlc=$gobin/sqlc
if [[ $("$sqlc" version 2>/dev/null) != "$SQLC_VERSION" ]]; then
	echo "sqlc.sh: installing sqlc $SQLC_VERSION into $gobin" >&2
	go install "github.com/sqlc-dev/sqlc/cmd/sqlc@$SQLC_VERSION"
fi
exec "$sqlc" "$@"
