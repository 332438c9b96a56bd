#!/usr/bin/env bash
# docker-env.sh: a throwaway Docker engine and the project's image, for the image's tests.
#
#   scripts/docker-env.sh start DIR    start dockerd with its data root, exec root, socket and pidfile in
#                                      DIR (host networking only: no bridge, no iptables); write DIR/env
#   scripts/docker-env.sh images DIR   make the base images the Dockerfile starts FROM, locally (no
#                                      registry is needed): debian:bookworm-slim from debootstrap, and
#                                      golang:1.26-bookworm from it, this machine's Go toolchain and a
#                                      module cache holding this project's modules
#   scripts/docker-env.sh build DIR    docker build the project's Dockerfile as alternative-fabric-manager
#                                      (version and commit from Git)
#   scripts/docker-env.sh stop DIR     remove every container of that engine, stop it by its PID, unmount
#                                      what it left mounted; safe to run twice or on a DIR never started
#
# DIR/env holds DOCKER_HOST=unix://DIR/docker.sock; load it with `set -a; . DIR/env; set +a`.
# Runs as root; needs the Debian packages docker.io and debootstrap (scripts/test-env.sh install).
set -euo pipefail
cd "$(dirname "$0")/.."

START_TIMEOUT=60
STOP_TIMEOUT=30
IMAGE=alternative-fabric-manager

die() { echo "docker-env: $*" >&2; exit 1; }
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

running() { # running PID
	[[ -n ${1:-} && -d /proc/$1 && $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# The PIDs of processes whose command line names DIR: dockerd, its containerd and their shims
# (each has DIR's exec root or socket in its arguments). Nothing else on the machine matches.
processes_of() { # processes_of DIR
	local p
	for p in /proc/[0-9]*; do
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$1/" && echo "${p#/proc/}"
	done
	return 0
}

docker_() { DOCKER_HOST=unix://$dir/docker.sock docker "$@"; }

cmd_start() {
	[[ ! -e $dir/pid ]] || die "$dir already has an engine (pid file $dir/pid); stop it first"
	mkdir -p "$dir"
	command -v dockerd >/dev/null || die "dockerd not found (install docker.io: scripts/test-env.sh install docker.io)"
	# overlay2: vfs copies every layer and container in full and makes a build take many minutes.
	setsid dockerd --storage-driver=overlay2 --iptables=false --bridge=none \
		--data-root "$dir/data" --exec-root "$dir/exec" -H "unix://$dir/docker.sock" \
		--pidfile "$dir/pid" >"$dir/dockerd.log" 2>&1 </dev/null &
	local i
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		if docker_ info >/dev/null 2>&1; then
			echo "DOCKER_HOST=unix://$dir/docker.sock" >"$dir/env"
			echo "docker-env: dockerd $(docker_ version --format '{{.Server.Version}}') on unix://$dir/docker.sock (pid $(cat "$dir/pid"))"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$dir/dockerd.log" >&2
	die "dockerd did not answer within ${START_TIMEOUT}s"
}

cmd_images() {
	local mirror rootfs=$dir/rootfs gofs=$dir/golang
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	[[ -n $mirror ]] || mirror=$(awk '/^deb / { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
	[[ -n $mirror ]] || mirror=http://deb.debian.org/debian
	if ! docker_ image inspect debian:bookworm-slim >/dev/null 2>&1; then
		echo "docker-env: debian:bookworm-slim from debootstrap ($mirror)"
		rm -rf "$rootfs"
		debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
			{ tail -n 20 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
		rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
		tar -C "$rootfs" -c . | docker_ import - debian:bookworm-slim >/dev/null
	fi
	if ! docker_ image inspect golang:1.26-bookworm >/dev/null 2>&1; then
		echo "docker-env: golang:1.26-bookworm from the same root, $(go env GOVERSION) and this project's modules"
		[[ -d $rootfs ]] || die "no $rootfs: remove the image debian:bookworm-slim and run images again"
		# Inside a container the module proxy cannot be reached, so the build must not download: the
		# image's module cache holds every module of go.sum, fetched through this machine's own cache.
		GOMODCACHE=$dir/modcache GOFLAGS=-modcacherw \
			GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)" GONOSUMDB='*' GOSUMDB=off \
			go mod download
		rm -rf "$gofs"
		mkdir -p "$gofs/usr/local" "$gofs/go/pkg"
		cp -a "$rootfs/." "$gofs/"
		cp -a "$(go env GOROOT)" "$gofs/usr/local/go"
		mv "$dir/modcache" "$gofs/go/pkg/mod"
		tar -C "$gofs" -c . | docker_ import \
			-c 'ENV PATH=/usr/local/go/bin:/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			-c 'ENV GOPATH=/go' -c 'ENV GOPROXY=off' -c 'ENV GOFLAGS=-mod=mod' -c 'ENV GOTOOLCHAIN=local' \
			- golang:1.26-bookworm >/dev/null
		rm -rf "$gofs"
	fi
	rm -rf "$rootfs"
}

cmd_build() {
	local commit version date
	commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
	version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
	date=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || echo unknown)
	echo "docker-env: docker build -t $IMAGE ($version)"
	docker_ build -q --network host --build-arg VERSION="$version" --build-arg COMMIT="$commit" --build-arg DATE="$date" \
		-t "$IMAGE" . >"$dir/build.log" 2>&1 || { tail -n 40 "$dir/build.log" >&2; die "docker build failed"; }
}

cmd_stop() {
	[[ -d $dir ]] || return 0
	local pid i ids
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	if running "$pid"; then
		ids=$(docker_ ps -aq 2>/dev/null || true)
		[[ -z $ids ]] || docker_ rm -f $ids >/dev/null 2>&1 || true
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
			running "$pid" || break
			sleep 0.1
		done
		running "$pid" && kill -KILL "$pid" 2>/dev/null || true
	fi
	# What dockerd did not take down with it (a shim, its containerd after a SIGKILL).
	for pid in $(processes_of "$dir"); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	# Overlay and shm mounts under the data and exec roots, deepest first.
	awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -f "$dir/pid" "$dir/env"
}

(($# == 2)) || usage
dir=$2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case $1 in
start) cmd_start ;;
images) cmd_images ;;
build) cmd_build ;;
stop) cmd_stop ;;
*) usage ;;
esac
