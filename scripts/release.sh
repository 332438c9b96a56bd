#!/usr/bin/env bash
# release.sh: every artifact of a release, from the commit checked out (`make release VERSION=vX.Y.Z`).
#
#   scripts/release.sh [VERSION]
#
# VERSION is vMAJOR.MINOR.PATCH with an optional -prerelease; without it, a snapshot named like a Go
# pseudo-version (v0.0.0-<commit time>-<commit>, or after the last tag vX.Y.Z). A tag named VERSION
# must point at the commit. Writes DIST (default dist/), emptied first:
#
#   alternative-fabric-manager_<version>_linux_{amd64,arm64}   static binaries (CGO_ENABLED=0)
#   alternative-fabric-manager_<version>_{amd64,arm64}.deb     Debian packages (nfpm, packaging/nfpm.yaml)
#   alternative-fabric-manager_<version>_sbom.cdx.json         CycloneDX SBOM of go.mod's modules
#   alternative-fabric-manager_<version>_image.tar.gz          the image (docker save), tagged <version>
#                                                              and sha-<commit>, bases pinned by digest
#   base-images.txt                                            the digest each base image was pinned to
#   SHA256SUMS                                                 sha256sum of each of the above
#
# Everything is built from `git archive` of HEAD in a temporary directory, never from the working
# tree: uncommitted changes are not in a release. The build time is the commit's (SOURCE_DATE_EPOCH),
# paths are trimmed and no build ID or VCS stamp depends on the machine, so two builds of one commit
# give byte-identical binaries, packages and SBOM (scripts/release-test.sh checks it). The image needs
# a Docker engine (DOCKER_HOST) holding the base images (scripts/docker-env.sh images makes them
# without a registry); RELEASE_IMAGE=0 leaves the image out. RELEASE_ARCHES (default "amd64 arm64")
# names the architectures of the binaries and packages (scripts/release-test.sh builds one again).
#
# Needs Go (go.mod's version), git, jq and, for the image, docker and gzip.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=alternative-fabric-manager
read -ra ARCHES <<<"${RELEASE_ARCHES:-amd64 arm64}"
DIST=${DIST:-dist}
RELEASE_IMAGE=${RELEASE_IMAGE:-1}

die() { echo "release: $*" >&2; exit 1; }
say() { echo "release: $*"; }
# took STEP: how long the step just finished took, so that a slow release shows where its time went.
last=$SECONDS
took() { say "$1: $((SECONDS - last)) s"; last=$SECONDS; }

for tool in go git jq; do
	command -v "$tool" >/dev/null || die "$tool not found (jq: apt-get install jq)"
done
(($# <= 1)) || die "usage: $0 [vX.Y.Z]"
((${#ARCHES[@]} > 0)) || die "RELEASE_ARCHES is empty"
for arch in "${ARCHES[@]}"; do
	[[ $arch == amd64 || $arch == arm64 ]] || die "RELEASE_ARCHES names \"$arch\": only amd64 and arm64 are released"
done

commit=$(git rev-parse HEAD)
epoch=$(git log -1 --format=%ct "$commit")
date=$(TZ=UTC date -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

# The version: given, or a snapshot's. A given one is checked against the tag of that name, if any.
version=${1:-}
if [[ -n $version ]]; then
	[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
		die "VERSION \"$version\" is not vMAJOR.MINOR.PATCH[-prerelease] (for example v0.1.0)"
	if tagged=$(git rev-parse -q --verify "refs/tags/$version^{commit}"); then
		[[ $tagged == "$commit" ]] || die "tag $version is commit $tagged, not the one checked out ($commit)"
	fi
else
	base=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || echo v0.0.0)
	version=$base-$(TZ=UTC date -d "@$epoch" +%Y%m%d%H%M%S)-${commit:0:12}
fi
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
	say "warning: uncommitted changes are not in the release (it is built from commit $commit)"
say "$NAME $version, commit $commit, built $date"

work=$(mktemp -d "${TMPDIR:-/tmp}/afm-release.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src" "$work/bin"
git archive "$commit" | tar -x -C "$src"
# DIST is emptied: refuse a directory that plainly is not one of its own.
mkdir -p "$DIST"
dist=$(cd "$DIST" && pwd)
case $dist in
/ | "$HOME" | "$PWD") die "DIST=$DIST would empty $dist" ;;
"$PWD"/*) [[ $dist == "$PWD/dist" ]] || die "DIST=$DIST would empty $dist, a directory of the checkout" ;;
esac
find "$dist" -mindepth 1 -delete

# --- binaries: pure Go, cross-compiled -----------------------------------------------------------
# The same flags as the Dockerfile's build: its linux/amd64 binary is byte-identical to this one.
ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.date=$date"
for arch in "${ARCHES[@]}"; do
	say "binary linux/$arch"
	(cd "$src" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
		go build -trimpath -buildvcs=false -ldflags "$ldflags" \
		-o "$dist/${NAME}_${version}_linux_$arch" ./cmd/alternative-fabric-manager)
	took "binary linux/$arch"
done

# --- the tools, at the versions tools/go.mod pins ------------------------------------------------
# Built as the binaries are (no cgo, trimmed paths), so that they share the standard library and the
# common modules in the build cache with them; go tool keeps each tool's executable in that cache too:
# a release after the first links neither.
for tool in nfpm cyclonedx-gomod; do
	exe=$(CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath" go -C "$src/tools" tool -n "$tool") ||
		die "cannot build $tool (tools/go.mod)"
	cp "$exe" "$work/bin/$tool"
done
took "tools nfpm and cyclonedx-gomod"

# --- Debian packages ------------------------------------------------------------------------------
# The unit as deploy/ has it, but with the binary where a package puts it (Debian leaves /usr/local
# to the administrator).
sed 's|/usr/local/bin/alternative-fabric-manager|/usr/bin/alternative-fabric-manager|g' \
	"$src/deploy/$NAME.service" >"$work/$NAME.service"
for arch in "${ARCHES[@]}"; do
	say "package ${NAME}_${version}_$arch.deb"
	(cd "$src" && ARCH=$arch VERSION=$version SOURCE_DATE_EPOCH=$epoch \
		AFM_BINARY="$dist/${NAME}_${version}_linux_$arch" AFM_UNIT="$work/$NAME.service" \
		"$work/bin/nfpm" package --config packaging/nfpm.yaml --packager deb \
		--target "$dist/${NAME}_${version}_$arch.deb" >/dev/null)
done
took "packages"

# --- SBOM -----------------------------------------------------------------------------------------
# Every module go.mod requires (-test: those only the tests use too), without the random serial
# number and the time of generation. The export has no Git for the tool to take the version from.
say "SBOM ${NAME}_${version}_sbom.cdx.json"
"$work/bin/cyclonedx-gomod" mod -json -noserial -notimestamp -test -output "$work/sbom.json" "$src" 2>"$work/sbom.log" ||
	{ cat "$work/sbom.log" >&2; die "cyclonedx-gomod failed"; }
jq --arg v "$version" '.metadata.component.version = $v
	| .metadata.component.purl |= sub("\\?"; "@" + $v + "?")' \
	"$work/sbom.json" >"$dist/${NAME}_${version}_sbom.cdx.json"
took "SBOM"

# --- the image ------------------------------------------------------------------------------------
# pin NAME: NAME@sha256:<manifest digest> for an image pulled from a registry; for one made locally
# (no registry digest), its image ID, which is the digest of its configuration and layers.
pin() {
	docker image inspect "$1" >/dev/null 2>&1 || docker pull -q "$1" >/dev/null 2>&1 ||
		die "no base image $1 on the Docker engine, and it cannot be pulled (scripts/docker-env.sh images makes it)"
	local digest
	digest=$(docker image inspect -f '{{range .RepoDigests}}{{println .}}{{end}}' "$1" | head -n 1)
	if [[ -n $digest ]]; then echo "${1%:*}@${digest#*@}"; else docker image inspect -f '{{.Id}}' "$1"; fi
}
if [[ $RELEASE_IMAGE != 0 ]]; then
	command -v docker >/dev/null || die "docker not found (RELEASE_IMAGE=0 leaves the image out)"
	docker info >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (RELEASE_IMAGE=0 leaves the image out)"
	golang_image=$(sed -n 's/^ARG GOLANG_IMAGE=//p' "$src/Dockerfile")
	debian_image=$(sed -n 's/^ARG DEBIAN_IMAGE=//p' "$src/Dockerfile")
	golang_pin=$(pin "$golang_image")
	debian_pin=$(pin "$debian_image")
	printf '%s %s\n' "$golang_image" "$golang_pin" "$debian_image" "$debian_pin" >"$dist/base-images.txt"
	say "image $NAME:$version and $NAME:sha-$commit (FROM $golang_pin, $debian_pin)"
	docker build -q --network host \
		--build-arg GOLANG_IMAGE="$golang_pin" --build-arg DEBIAN_IMAGE="$debian_pin" \
		--build-arg VERSION="$version" --build-arg COMMIT="$commit" --build-arg DATE="$date" \
		-t "$NAME:$version" -t "$NAME:sha-$commit" "$src" >"$work/build.log" 2>&1 ||
		{ tail -n 40 "$work/build.log" >&2; die "docker build failed"; }
	took "image build"
	docker save "$NAME:$version" "$NAME:sha-$commit" | gzip -n >"$dist/${NAME}_${version}_image.tar.gz"
	took "image archive"
fi

(cd "$dist" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort |
	xargs sha256sum >SHA256SUMS)
say "wrote $DIST:"
(cd "$dist" && ls -l --time-style=+ | tail -n +2 | awk '{ printf "  %12d  %s\n", $5, $NF }')
