#!/usr/bin/env bash
# image-smoke.sh: the image on a simulated fabric, for each OpenSM driver (process, managed, docker).
#
#   scripts/image-smoke.sh DOCKER_DIR
#
# DOCKER_DIR is an engine started by scripts/docker-env.sh (start, images, build), holding the image
# alternative-fabric-manager. The image's labels and --version must name this checkout's commit. Then,
# for each driver, on a fabric of its own: the manager's container is run as the README's docker run
# lines say (same names, same mounts, plus the fabric's), the fabric's switches are confirmed with
# docker exec, a VLAN network and a port are sent, the port's job must complete and the port's P_Key
# table must hold the network's pkey. Then the manager's container is killed (docker kill for process
# and docker; for managed, docker rm -f, and in a second run kill -9 of the manager's process) and no
# OpenSM of it may be left: no OpenSM process on the
# fabric, and with managed, no OpenSM container. With docker, the OpenSM container someone else runs
# is still running. Everything it starts is removed however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

DEADLINE=120 # seconds for each wait; generous, so that a broken image cannot hang the run
IMAGE=alternative-fabric-manager
NAME=alternative-fabric-manager # the README's container name, [opensm] manager_container's default
SM_GUID=0x0002c90300a00001      # the fabric's SM port
H1_GUID=0x0002c90300000101
NETWORK_ID=3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73
PORT_ID=8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94
VOLUME=afm_data
CONF_DIR=/var/lib/alternative-fabric-manager/opensm # [opensm] config_dir's default, on the volume

die() { echo "image-smoke: $*" >&2; exit 1; }
say() { echo "image-smoke: $*"; }

(($# == 1)) || die "usage: $0 DOCKER_DIR"
docker_dir=$(cd "$1" && pwd)
set -a
# shellcheck source=/dev/null # written by docker-env.sh start
. "$docker_dir/env"
set +a
socket=${DOCKER_HOST#unix://}

work=$(mktemp -d /tmp/afm-containers-smoke.XXXXXX)
fabric_sim=$work/fabric-sim
fabric=
cleanup() {
	local status=$?
	if ((status != 0)); then
		echo "image-smoke: failed; the manager's log:" >&2
		docker logs --tail 40 "$NAME" >&2 2>&1 || true
	fi
	docker rm -f "$NAME" opensm >/dev/null 2>&1 || true
	docker volume rm -f "$VOLUME" >/dev/null 2>&1 || true
	[[ -z $fabric ]] || "$fabric_sim" stop "$fabric" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

go build -o "$fabric_sim" ./e2e/cmd/fabric-sim

# --- the image itself ----------------------------------------------------------------------------

commit=$(git rev-parse HEAD)
label=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$IMAGE")
[[ $label == "$commit" ]] || die "label org.opencontainers.image.revision is $label, want $commit"
version=$(docker run --rm --network none "$IMAGE" --version)
[[ $version == *"(commit $commit, built "* ]] || die "--version printed \"$version\", want the commit $commit"
[[ $(docker image inspect -f '{{json .Config.Healthcheck.Test}}' "$IMAGE") == *--healthcheck* ]] ||
	die "the image has no HEALTHCHECK running --healthcheck"
say "image: $version, labels and HEALTHCHECK in place"

# --- helpers ---------------------------------------------------------------------------------------

client_id() { # the 20-octet InfiniBand DHCP client-id of a port GUID
	local hex=${1#0x}
	echo "ff:00:00:00:00:00:02:00:00:02:c9:00:$(sed 's/../&:/g; s/:$//' <<<"$hex")"
}

free_port() {
	local port hex
	while :; do
		port=$((10000 + RANDOM % 22000))
		hex=$(printf '%04X' "$port")
		awk -v p="$hex" 'FNR > 1 { split($2, a, ":"); if (a[2] == p) f = 1 } END { exit !f }' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null || break
	done
	echo "$port"
}

until_ok() { # until_ok WHAT COMMAND...: every half second until it succeeds, DEADLINE at most
	local what=$1 i
	shift
	for ((i = 0; i < DEADLINE * 2; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	die "no $what within ${DEADLINE}s"
}

# The PIDs of the OpenSMs attached to this fabric (its ibsim socket is in their environment).
fabric_opensms() {
	local sock p
	sock=$(sed -n 's/^IBSIM_SOCKNAME=//p' "$fabric/env")
	for p in /proc/[0-9]*; do
		[[ $(cat "$p/comm" 2>/dev/null) == opensm ]] || continue
		tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "IBSIM_SOCKNAME=$sock" && echo "${p#/proc/}"
	done
	return 0
}
no_fabric_opensm() { [[ -z $(fabric_opensms) ]]; }
container_gone() { ! docker container inspect "$1" >/dev/null 2>&1; }

job_status() { # job_status URL JOB
	curl -sSf -H "Authorization: Basic $token" "$1/$2" | tr -d '\n' |
		sed -n 's/.*"Status" *: *"\([A-Za-z]*\)".*/\1/p'
}

# --- one driver ------------------------------------------------------------------------------------

smoke() { # smoke DRIVER VLAN [HOW]: HOW the manager is stopped, for managed: rm (default) or kill-9
	local driver=$1 vlan=$2 how=${3:-rm} port url etc started=$SECONDS
	local umad pkey job i status
	pkey=$(printf '0x%04x' $((0x8000 | vlan)))
	fabric=$work/$driver/fabric
	etc=$work/$driver/etc
	mkdir -p "$etc"
	"$fabric_sim" start "$fabric" --hosts 2 >/dev/null
	umad=$(dirname "$(sed -n 's/^LD_PRELOAD=//p' "$fabric/env")")
	port=$(free_port)
	url=http://127.0.0.1:$port/ufmRestV3
	token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
	cat >"$etc/afm.conf" <<-EOF
		[api]
		listen = 127.0.0.1:$port
		token = $token

		[opensm]
		driver = $driver
		env_file = $fabric/env

		[opensm_conf]
		guid = $SM_GUID
	EOF

	# The README's lines, plus what the simulated fabric needs: its directory (env, OpenSM's
	# cache) and libumad2sim at the paths the env file names.
	local fabric_mounts=(-v "$fabric:$fabric" -v "$umad:$umad:ro")
	# No capabilities and no privilege gain, as the README runs it: root in the container uses only
	# what root owns (the volume, the devices).
	local confined=(--cap-drop ALL --security-opt no-new-privileges)
	local run=(docker run -d --init --name "$NAME" --network host "${confined[@]}"
		-v "$etc:/etc/alternative-fabric-manager:ro" -v "$VOLUME:/var/lib/alternative-fabric-manager"
		"${fabric_mounts[@]}")
	case $driver in
	process) run+=(--health-interval 1s --health-start-period 60s) ;;
	managed) run+=(-v "$socket:/var/run/docker.sock") ;;
	docker)
		run+=(-v "$socket:/var/run/docker.sock")
		# Someone else's OpenSM container: config_dir's directory at the same path (here: the same
		# volume), reading the opensm.conf the manager writes. Created now, started once written.
		docker create --init --name opensm --network host "${confined[@]}" --env-file "$fabric/env" \
			-v "$VOLUME:/var/lib/alternative-fabric-manager" "${fabric_mounts[@]}" \
			--entrypoint opensm "$IMAGE" -F "$CONF_DIR/opensm.conf" >/dev/null
		;;
	esac
	"${run[@]}" "$IMAGE" >/dev/null
	if [[ $driver == docker ]]; then
		until_ok "opensm.conf from the manager" docker exec "$NAME" test -s "$CONF_DIR/opensm.conf"
		docker start opensm >/dev/null
	fi
	until_ok "answer on $url" curl -sSf "http://127.0.0.1:$port/healthz"
	until_ok "switches to confirm (OpenSM's first sweep)" docker exec "$NAME" \
		alternative-fabric-manager --config-file /etc/alternative-fabric-manager/afm.conf --confirm-switches

	curl -sSf -o /dev/null -H "Authorization: Basic $token" -H 'Content-Type: application/json' \
		--data "{\"id\": \"$NETWORK_ID\", \"provider:network_type\": \"vlan\", \"provider:physical_network\": \"ibnet\",
		         \"provider:segmentation_id\": $vlan, \"admin_state_up\": true}" "$url/cloudx/Network"
	job=$(curl -sSf -H "Authorization: Basic $token" -H 'Content-Type: application/json' \
		--data "{\"id\": \"$PORT_ID\", \"network_id\": \"$NETWORK_ID\", \"admin_state_up\": true,
		         \"device_owner\": \"baremetal:none\", \"binding:vnic_type\": \"baremetal\",
		         \"binding:host_id\": \"h1\", \"binding:profile\": {\"local_link_information\": [{}]},
		         \"extra_dhcp_opts\": [{\"opt_name\": \"client-id\", \"opt_value\": \"$(client_id $H1_GUID)\", \"ip_version\": 4}]}" \
		"$url/cloudx/Port" | tr -d '"\n')
	for ((i = 0; i < DEADLINE * 2; i++)); do
		status=$(job_status "$url" "$job") || true
		[[ $status == Completed ]] && break
		[[ $status != Failed ]] || die "$driver: the port's job failed"
		sleep 0.5
	done
	[[ $status == Completed ]] || die "$driver: the port's job is ${status:-unknown} after ${DEADLINE}s"
	"$fabric_sim" pkeys "$fabric" "$H1_GUID" | grep -qx "$pkey" ||
		die "$driver: H1's P_Key table lacks $pkey: $("$fabric_sim" pkeys "$fabric" "$H1_GUID" | tr '\n' ' ')"
	[[ -n $(fabric_opensms) ]] || die "$driver: no OpenSM process on the fabric"
	say "$driver: job Completed, H1 holds $pkey"

	case $driver in
	process)
		until_ok "healthy container" bash -c "[[ \$(docker inspect -f '{{.State.Health.Status}}' $NAME) == healthy ]]"
		say "$driver: the container is healthy"
		docker kill "$NAME" >/dev/null
		until_ok "end of the fabric's OpenSM after docker kill" no_fabric_opensm
		say "$driver: docker kill $NAME: no OpenSM left"
		;;
	managed)
		[[ $(docker inspect -f '{{.HostConfig.PidMode}}' opensm) == "container:$(docker inspect -f '{{.Id}}' "$NAME")" ]] ||
			die "managed: the container opensm is not in the manager's PID namespace"
		[[ $(docker inspect -f '{{json .HostConfig.CapDrop}}' opensm) == *ALL* ]] ||
			die "managed: the container opensm has capabilities its manager's container dropped"
		if [[ $how == kill-9 ]]; then
			# The manager's process itself, not its container: the container's init (--init) then
			# exits, and the kernel ends the PID namespace OpenSM is in.
			local init_pid manager_pid
			init_pid=$(docker inspect -f '{{.State.Pid}}' "$NAME")
			# The kernel ends the list with a blank and no newline, so read reports end of file.
			read -r manager_pid _ <"/proc/$init_pid/task/$init_pid/children" || true
			[[ -n $manager_pid ]] || die "managed: the container's init has no child"
			[[ $(cat "/proc/$manager_pid/comm") == alternative-fab* ]] || die "managed: PID $manager_pid is not the manager"
			kill -KILL "$manager_pid"
			how="kill -9 of the manager (PID $manager_pid)"
		else
			docker rm -f "$NAME" >/dev/null
			how="docker rm -f $NAME"
		fi
		until_ok "removal of the container opensm after $how" container_gone opensm
		until_ok "end of the fabric's OpenSM after $how" no_fabric_opensm
		say "$driver: $how: its OpenSM container is gone, no OpenSM left"
		;;
	docker)
		docker kill "$NAME" >/dev/null
		sleep 1
		[[ $(docker inspect -f '{{.State.Running}}' opensm) == true ]] ||
			die "docker: the manager stopped the OpenSM container it does not own"
		say "$driver: docker kill $NAME: the OpenSM container it signals keeps running"
		docker rm -f opensm >/dev/null
		until_ok "end of the fabric's OpenSM" no_fabric_opensm
		;;
	esac
	docker rm -f "$NAME" >/dev/null 2>&1 || true
	docker volume rm -f "$VOLUME" >/dev/null
	"$fabric_sim" stop "$fabric" >/dev/null
	fabric=
	say "$driver: passed in $((SECONDS - started))s"
}

smoke process 101
smoke managed 102 rm
smoke managed 104 kill-9
smoke docker 103
say "all three drivers passed"
