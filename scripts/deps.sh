#!/usr/bin/env bash
# deps.sh: what has a newer version than the tree pins (`make deps`), for the dependency-update routine.
#
#   - Go modules of go.mod and of tools/go.mod (the release tools) with a newer release, from the
#     module proxy (go list -m -u)
#   - the Go toolchain: go.mod's go line against the newest release (go@latest, from the module proxy);
#     a new minor release also means a new golang base image tag in the Dockerfile
#   - each base image of the Dockerfile (ARG *_IMAGE): the digest its tag has on the registry now,
#     against the one the local Docker engine has (what make release would pin)
#
# Changes nothing. Exits 1 if a source could not be asked (the list is then incomplete).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
warn() { echo "deps: $*" >&2; status=1; }

updates() { # updates DIR: the modules of DIR's go.mod with a newer version
	# -e: a module whose retractions cannot be read is listed anyway.
	(cd "$1" && go list -e -m -u -f '{{if and .Update (not .Main)}}{{.Path}} {{.Version}} -> {{.Update.Version}}{{if .Indirect}} (indirect){{end}}{{end}}' all) ||
		warn "go list -m -u failed in $1"
}
echo "== Go modules (go.mod)"
updates .
echo "== release tools (tools/go.mod)"
updates tools

echo "== Go toolchain"
pinned=$(go mod edit -json | jq -r .Go)
if latest=$(go list -m -f '{{.Version}}' go@latest); then
	if [[ $latest != "$pinned" ]]; then echo "go $pinned -> $latest"; else echo "go $pinned is the newest"; fi
else
	warn "the module proxy does not answer go@latest"
fi

# registry_digest IMAGE: the manifest digest Docker Hub has for IMAGE (name:tag) now.
registry_digest() {
	local repo=${1%:*} tag=${1##*:} token
	[[ $repo == */* ]] || repo=library/$repo
	token=$(curl -fsS --max-time 20 "https://auth.docker.io/token?service=registry.docker.io&scope=repository:$repo:pull" |
		jq -r .token) || return 1
	curl -fsSI --max-time 20 -H "Authorization: Bearer $token" \
		-H 'Accept: application/vnd.oci.image.index.v1+json' \
		-H 'Accept: application/vnd.docker.distribution.manifest.list.v2+json' \
		"https://registry-1.docker.io/v2/$repo/manifests/$tag" |
		tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" { print $2 }'
}
echo "== base images (Dockerfile)"
for image in $(sed -n 's/^ARG [A-Z]*_IMAGE=//p' Dockerfile); do
	local_digest=$(docker image inspect -f '{{range .RepoDigests}}{{println .}}{{end}}' "$image" 2>/dev/null |
		head -n 1 | sed 's/.*@//') || true
	if ! remote=$(registry_digest "$image") || [[ -z $remote ]]; then
		warn "the registry cannot be reached for $image (local: ${local_digest:-no registry digest})"
	elif [[ $remote != "$local_digest" ]]; then
		echo "$image ${local_digest:-(local image, no registry digest)} -> $remote (docker pull $image)"
	else
		echo "$image $remote is the newest"
	fi
done
exit "$status"
