#!/usr/bin/env bash
# release-test.sh: what `make release` writes is what docs/releasing.md promises (test.sh runs it).
#
#   scripts/release-test.sh build DOCKER_DIR DIST   make release VERSION=v0.0.0-ci of this commit into DIST,
#                                                   on that engine, and tag its image alternative-fabric-manager
#                                                   as well: make test builds the image once, this way, for
#                                                   the driver tests and scripts/image-smoke.sh
#   scripts/release-test.sh check DOCKER_DIR DIST   check what build wrote:
#   - sha256sum -c SHA256SUMS passes
#   - the binaries are static ELF executables for x86-64 and aarch64, with trimmed paths
#   - the SBOM is CycloneDX JSON naming the version and listing every module the binary and the tests
#     are built from, and every direct requirement of go.mod
#   - the image archive loads, holds both tags, its labels name the commit and the pinned base, its
#     --version prints the version, and its binary is the release's linux/amd64 binary, byte for byte
#   - the amd64 .deb, in a clean Debian 12 container (debian:bookworm-slim): it Depends on opensm;
#     dpkg -i installs every file where the unit expects it, creates the system user and the modes
#     the unit expects, --version prints the version; dpkg -r leaves only the conffiles; dpkg --purge
#     leaves the file system as it was before the install
#   - reproducibility: the image's binary, compiled apart, is the linux/amd64 one; the linux/amd64
#     binary, package and the SBOM built again from another directory are byte-identical
#
# DOCKER_DIR is an engine started by scripts/docker-env.sh (start, images).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=alternative-fabric-manager
VERSION=v0.0.0-ci

die() { echo "release-test: $*" >&2; exit 1; }
say() { echo "release-test: $*"; }

(($# == 3)) && [[ $1 == build || $1 == check ]] || die "usage: $0 build|check DOCKER_DIR DIST"
docker_dir=$(cd "$2" && pwd)
mkdir -p "$3"
dist=$(cd "$3" && pwd)
set -a
# shellcheck source=/dev/null # written by docker-env.sh start
. "$docker_dir/env"
set +a
command -v jq >/dev/null || bash scripts/test-env.sh install jq
commit=$(git rev-parse HEAD)

if [[ $1 == build ]]; then
	start=$SECONDS
	DIST=$dist bash scripts/release.sh "$VERSION" || die "make release failed"
	docker tag "$NAME:$VERSION" "$NAME"
	say "release $VERSION in $((SECONDS - start)) s; its image is $NAME too"
	exit 0
fi

work=$(mktemp -d /tmp/afm-release-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
bin_amd64=$dist/${NAME}_${VERSION}_linux_amd64
bin_arm64=$dist/${NAME}_${VERSION}_linux_arm64
deb_amd64=$dist/${NAME}_${VERSION}_amd64.deb
sbom=$dist/${NAME}_${VERSION}_sbom.cdx.json
image=$dist/${NAME}_${VERSION}_image.tar.gz
for f in "$bin_amd64" "$bin_arm64" "$deb_amd64" "$dist/${NAME}_${VERSION}_arm64.deb" "$sbom" "$image" \
	"$dist/base-images.txt" "$dist/SHA256SUMS"; do
	[[ -s $f ]] || die "make release wrote no ${f##*/} (run $0 build first)"
done
[[ $("$bin_amd64" --version) == *"(commit $commit, "* ]] ||
	die "$dist holds the release of another commit: $("$bin_amd64" --version)"

# --- checksums ------------------------------------------------------------------------------------
(cd "$dist" && sha256sum --quiet -c SHA256SUMS) || die "sha256sum -c SHA256SUMS failed"
listed=$(awk '{ print $2 }' "$dist/SHA256SUMS" | sort | tr '\n' ' ')
present=$(cd "$dist" && ls | grep -vx SHA256SUMS | sort | tr '\n' ' ')
[[ $listed == "$present" ]] || die "SHA256SUMS lists \"$listed\", dist/ holds \"$present\""
say "SHA256SUMS: $(wc -l <"$dist/SHA256SUMS") artifacts verify"

# --- binaries -------------------------------------------------------------------------------------
elf_machine() { # the ELF header's class (2: 64-bit) and e_machine, as "<class> <machine>"
	od -An -tu1 -j4 -N1 "$1" | tr -d ' '
	od -An -tu2 -j18 -N2 --endian=little "$1" | tr -d ' '
}
[[ $(head -c4 "$bin_arm64" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] || die "${bin_arm64##*/} is not ELF"
[[ $(elf_machine "$bin_arm64" | tr '\n' ' ') == "2 183 " ]] || die "${bin_arm64##*/} is not a 64-bit aarch64 ELF"
[[ $(elf_machine "$bin_amd64" | tr '\n' ' ') == "2 62 " ]] || die "${bin_amd64##*/} is not a 64-bit x86-64 ELF"
for b in "$bin_amd64" "$bin_arm64"; do
	settings=$(go version -m "$b")
	for want in 'CGO_ENABLED=0' '-trimpath=true' "GOARCH=${b##*_}"; do
		grep -qF -- "$want" <<<"$settings" || die "${b##*/} was not built with $want: $settings"
	done
done
[[ $("$bin_amd64" --version) == "$NAME $VERSION (commit $commit, built "*Z")" ]] ||
	die "--version printed \"$("$bin_amd64" --version)\""
say "binaries: x86-64 and aarch64 ELF, static, trimmed; $("$bin_amd64" --version)"

# --- SBOM -----------------------------------------------------------------------------------------
jq -e '.bomFormat == "CycloneDX" and (.specVersion | length > 0)' "$sbom" >/dev/null ||
	die "${sbom##*/} is not a CycloneDX document"
[[ $(jq -r .metadata.component.version "$sbom") == "$VERSION" ]] || die "the SBOM does not name version $VERSION"
# The modules the binary and the tests are built from, and every direct requirement of go.mod. An
# indirect requirement no package of this module needs (go.mod keeps one for a dependency's own
# tests, such as github.com/kr/text for gopkg.in/yaml.v2's) is in no artifact and need not be listed.
want=$({
	go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}' ./...
	go mod edit -json | jq -r '.Require[] | select(.Indirect | not) | "\(.Path)@\(.Version)"'
} | sort -u)
missing=$(comm -23 <(echo "$want") <(jq -r '.components[] | "\(.name)@\(.version)"' "$sbom" | sort))
[[ -z $missing ]] || die "the SBOM lacks these modules the build uses: $missing"
say "SBOM: CycloneDX $(jq -r .specVersion "$sbom"), $(jq '.components | length' "$sbom") components, the $(grep -c . <<<"$want") modules the build uses"

# --- the image archive ----------------------------------------------------------------------------
docker rmi "$NAME:$VERSION" "$NAME:sha-$commit" >/dev/null
docker load -q -i "$image" >/dev/null
for tag in "$VERSION" "sha-$commit"; do
	docker image inspect "$NAME:$tag" >/dev/null 2>&1 || die "the image archive has no tag $NAME:$tag"
done
label() { docker image inspect -f "{{index .Config.Labels \"org.opencontainers.image.$1\"}}" "$NAME:$VERSION"; }
[[ $(label revision) == "$commit" && $(label version) == "$VERSION" ]] || die "the image's labels name $(label version) $(label revision)"
debian_pin=$(awk '$1 == "debian:bookworm-slim" { print $2 }' "$dist/base-images.txt")
[[ $debian_pin == *sha256:* && $(label base.name) == "$debian_pin" ]] ||
	die "the image's base is \"$(label base.name)\", want the digest base-images.txt pins ($debian_pin)"
[[ $(docker run --rm --network none "$NAME:$VERSION" --version) == "$("$bin_amd64" --version)" ]] ||
	die "the image's --version differs from the binary's"
docker create --name afm-release-test "$NAME:$VERSION" >/dev/null
docker cp afm-release-test:/usr/local/bin/$NAME "$work/image-binary" && docker rm afm-release-test >/dev/null
cmp -s "$work/image-binary" "$bin_amd64" || die "the image's binary differs from ${bin_amd64##*/}"
say "image: tags $VERSION and sha-$commit, base $debian_pin, its binary is the release's"

# --- the Debian package in a clean Debian 12 ------------------------------------------------------
[[ $(dpkg-deb -f "$deb_amd64" Depends) == *opensm* ]] || die "the package does not depend on opensm"
docker run --rm -i --network host -v "$dist:/dist:ro" -e DEB="/dist/${deb_amd64##*/}" -e VERSION="$VERSION" \
	debian:bookworm-slim bash -s <scripts/release-test-deb.sh >"$work/deb.log" 2>&1 ||
	{ cat "$work/deb.log" >&2; die "the package failed in Debian 12"; }
sed 's/^/  /' "$work/deb.log"

# --- reproducibility ------------------------------------------------------------------------------
# The image's binary (above) was compiled with no build cache, in another root and directory, and is
# the linux/amd64 binary byte for byte. Here the linux/amd64 binary and package and the SBOM are built
# again, from another directory (each release exports the commit to a new one), and must not differ.
# RELEASE_TEST_COLD=1 gives it an empty Go build cache too (a full compile).
start=$SECONDS
gocache=$(go env GOCACHE)
[[ ${RELEASE_TEST_COLD:-0} == 0 ]] || gocache=$work/gocache
DIST=$work/again GOCACHE=$gocache RELEASE_IMAGE=0 RELEASE_ARCHES=amd64 bash scripts/release.sh "$VERSION" \
	>"$work/again.log" 2>&1 || { cat "$work/again.log" >&2; die "the second release failed"; }
n=0
for f in "$work/again"/*; do
	[[ ${f##*/} != SHA256SUMS ]] || continue
	cmp "$f" "$dist/${f##*/}" || die "${f##*/} differs between two builds of one commit"
	n=$((n + 1))
done
((n == 3)) || die "the second release wrote $n artifacts, want 3"
say "reproducible: $n artifacts byte-identical when built again ($((SECONDS - start)) s)"
