#!/usr/bin/env bash
# demo.sh: the manager on a simulated InfiniBand fabric, on one machine, as networking-mlnx would use it.
#
#   scripts/demo.sh                  build, start a fabric of 4 hosts, print the requests to try, then
#                                    run the manager in the foreground; Ctrl-C stops it and the fabric
#   DEMO_SCRIPTED=1 scripts/demo.sh  the same, but send the requests itself, wait for the port's job,
#                                    print H1's P_Keys and exit 0 only if H1 is a full member of
#                                    VLAN 101's partition (P_Key 0x8065)
#
#   DEMO_DIR=DIR             work directory (default: a new one under /tmp); kept afterwards, logs
#                            included
#   DEMO_LISTEN=HOST:PORT    where the API listens (default 127.0.0.1:8090)
#
# Installs the Debian packages of OpenSM and the simulator when they are missing (needs root then).
set -euo pipefail
cd "$(dirname "$0")/.."

SCRIPTED=${DEMO_SCRIPTED:-0}
LISTEN=${DEMO_LISTEN:-127.0.0.1:8090}
DEADLINE=120 # seconds for each wait below; generous, only so that a broken demo cannot hang

# The fabric and what the demo does with it. fabric-sim names hosts H1..H4; H1's port GUID is
# fixed by its topology, and the SM's port is where OpenSM attaches.
SM_GUID=0x0002c90300a00001
H1_GUID=0x0002c90300000101
VLAN=101
FULL_MEMBER_PKEY=0x8065 # VLAN 101 = P_Key 0x0065, with the full-membership bit (0x8000)
NETWORK_ID=3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73
PORT_ID=8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94
DOMAIN=cloudx
PREFIX=/ufmRestV3

die() { echo "demo: $*" >&2; exit 1; }

# The 20-octet DHCP client-id an InfiniBand port sends: a fixed 12-octet prefix, then the port
# GUID. The manager takes the GUID back from its last 8 octets.
client_id() { # client_id GUID
	local hex=${1#0x}
	echo "ff:00:00:00:00:00:02:00:00:02:c9:00:$(sed 's/../&:/g; s/:$//' <<<"$hex")"
}

work=${DEMO_DIR:-$(mktemp -d /tmp/afm-demo.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
fabric=$work/fabric
bin=$work/bin
url=http://$LISTEN$PREFIX

# --- build and start the fabric --------------------------------------------------------------

bash scripts/test-env.sh install opensm ibsim-utils libumad2sim0 infiniband-diags curl
export PATH=$PATH:/usr/sbin:/sbin # opensm
echo "demo: building into $bin"
go build -o "$bin/alternative-fabric-manager" ./cmd/alternative-fabric-manager
go build -o "$bin/fabric-sim" ./e2e/cmd/fabric-sim
afm=$bin/alternative-fabric-manager
fabric_sim=$bin/fabric-sim

manager_pid=
cleanup() {
	if [[ -n $manager_pid ]] && kill -0 "$manager_pid" 2>/dev/null; then
		kill -TERM "$manager_pid" 2>/dev/null || true
		wait "$manager_pid" 2>/dev/null || true
	fi
	"$fabric_sim" stop "$fabric" || true
	echo "demo: stopped; the work directory $work is kept"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# fabric-sim starts the simulator only: the manager runs OpenSM itself, with the fabric's
# environment (env_file below) so that OpenSM talks to the simulator instead of real hardware.
"$fabric_sim" start "$fabric" --hosts 4

# --- configuration and requests --------------------------------------------------------------

token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$work/opensm"
cat >"$work/afm.conf" <<EOF
[api]
listen = $LISTEN
prefix = $PREFIX
domain = $DOMAIN
token = $token

[database]
connection = sqlite:///$work/afm.db

[opensm]
driver = process
command = opensm
env_file = $fabric/env
config_dir = $work/opensm

[opensm_conf]
guid = $SM_GUID
EOF

# A VLAN network and a baremetal port on it, as networking-mlnx sends them (trimmed to what
# the manager reads, plus the usual identifiers).
cat >"$work/network.json" <<EOF
{
  "id": "$NETWORK_ID",
  "name": "demo-vlan-$VLAN",
  "project_id": "6f0e3c2a9b8d4e71a5c4d3b2a1f09e8d",
  "tenant_id": "6f0e3c2a9b8d4e71a5c4d3b2a1f09e8d",
  "admin_state_up": true,
  "mtu": 2044,
  "provider:network_type": "vlan",
  "provider:physical_network": "ibnet",
  "provider:segmentation_id": $VLAN,
  "network_qos_policy": null
}
EOF
cat >"$work/port.json" <<EOF
{
  "id": "$PORT_ID",
  "name": "demo-h1",
  "network_id": "$NETWORK_ID",
  "project_id": "6f0e3c2a9b8d4e71a5c4d3b2a1f09e8d",
  "tenant_id": "6f0e3c2a9b8d4e71a5c4d3b2a1f09e8d",
  "admin_state_up": true,
  "device_owner": "baremetal:none",
  "device_id": "e2c47a1b-5f6d-4c8e-a9b0-3d1f2e4c6a78",
  "binding:vnic_type": "baremetal",
  "binding:host_id": "e2c47a1b-5f6d-4c8e-a9b0-3d1f2e4c6a78",
  "binding:profile": {"local_link_information": [{}]},
  "extra_dhcp_opts": [
    {"opt_name": "client-id", "opt_value": "$(client_id "$H1_GUID")", "ip_version": 4}
  ],
  "network_qos_policy": null
}
EOF

# A manager that holds jobs until the fabric's switches are confirmed has --confirm-switches;
# one without it has nothing to confirm, and the demo leaves that step out.
# The help is read whole first: grep -q leaves at its first match, and the manager, still writing its
# help, would end on SIGPIPE, which pipefail reports as the test's failure.
confirm_switches=()
afm_help=$("$afm" -h 2>&1 || true)
if grep -q -- '-confirm-switches' <<<"$afm_help"; then
	confirm_switches=("$afm" --config-file "$work/afm.conf" --confirm-switches)
fi
curl_api=(curl -sS -H "Authorization: Basic $token" -H 'Content-Type: application/json')
curl_shown="curl -sS -H 'Authorization: Basic $token' -H 'Content-Type: application/json'"

# --- interactive: show the steps, run the manager in the foreground --------------------------

if [[ $SCRIPTED != 1 ]]; then
	confirm_step=
	if ((${#confirm_switches[@]} > 0)); then
		confirm_step="
  # record the fabric's switches once OpenSM has swept (no job completes before):
  ${confirm_switches[*]}
"
	fi
	cat <<EOF

Work directory: $work (afm.conf, afm.db, opensm/, fabric/)
In another terminal, once the manager below is running:
$confirm_step
  # create VLAN $VLAN's network, then add H1's port ($H1_GUID) to it; each answers "app/jobs/<id>":
  $curl_shown --data @$work/network.json $url/$DOMAIN/Network
  $curl_shown --data @$work/port.json $url/$DOMAIN/Port

  # poll the port's job (ID from its answer) until its Status is Completed:
  $curl_shown $url/app/jobs/ID

  # H1's P_Key table, which now holds $FULL_MEMBER_PKEY (full member of P_Key 0x$(printf '%04x' "$VLAN")):
  $fabric_sim pkeys $fabric $H1_GUID

Ctrl-C stops the manager (and OpenSM with it) and the fabric.

EOF
	"$afm" --config-file "$work/afm.conf"
	exit
fi

# --- scripted: the same steps, checked ---------------------------------------------------------

"$afm" --config-file "$work/afm.conf" >"$work/manager.log" 2>&1 &
manager_pid=$!

# until_ok SECONDS WHAT COMMAND...: run COMMAND every half second until it succeeds; give up (with
# the manager's log) after SECONDS or as soon as the manager has exited.
until_ok() {
	local seconds=$1 what=$2 i
	shift 2
	for ((i = 0; i < seconds * 2; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		kill -0 "$manager_pid" 2>/dev/null || die "the manager exited while waiting for $what: $(tail -n 20 "$work/manager.log")"
		sleep 0.5
	done
	die "no $what within ${seconds}s: $(tail -n 20 "$work/manager.log")"
}

# post PATH FILE: send FILE, expect 202, print the job path it answers ("app/jobs/<id>").
post() {
	local status
	status=$("${curl_api[@]}" -o "$work/answer.json" -w '%{http_code}' --data @"$2" "$url/$1")
	[[ $status == 202 ]] || die "POST $1 answered $status: $(cat "$work/answer.json")"
	tr -d '"\n' <"$work/answer.json"
}

# job_status PATH: the job's "Status" field (Running, Completed, Failed, ...).
job_status() {
	"${curl_api[@]}" -f "$url/$1" | tr -d '\n' | sed -n 's/.*"Status" *: *"\([A-Za-z]*\)".*/\1/p'
}

# wait_for_job PATH: until the job has completed; dies if it fails.
wait_for_job() {
	local i status
	for ((i = 0; i < DEADLINE * 2; i++)); do
		status=$(job_status "$1") || true
		case $status in
		Completed) return 0 ;;
		Failed) die "job $1 failed: $("${curl_api[@]}" "$url/$1")" ;;
		esac
		kill -0 "$manager_pid" 2>/dev/null || die "the manager exited: $(tail -n 20 "$work/manager.log")"
		sleep 0.5
	done
	die "job $1 did not complete within ${DEADLINE}s (last status: ${status:-none}): $(tail -n 20 "$work/manager.log")"
}

until_ok "$DEADLINE" "answer on $url" curl -sSf "http://$LISTEN/healthz"
echo "demo: manager up"
if ((${#confirm_switches[@]} > 0)); then
	echo "demo: recording the fabric's switches"
	until_ok "$DEADLINE" "switches to confirm (OpenSM's first sweep)" "${confirm_switches[@]}"
fi

network_job=$(post "$DOMAIN/Network" "$work/network.json")
echo "demo: network of VLAN $VLAN: $network_job"
port_job=$(post "$DOMAIN/Port" "$work/port.json")
echo "demo: H1's port: $port_job; waiting for it to complete"
wait_for_job "$port_job"

echo "demo: H1's P_Keys:"
pkeys=$("$fabric_sim" pkeys "$fabric" "$H1_GUID")
echo "$pkeys"
grep -qx "$FULL_MEMBER_PKEY" <<<"$pkeys" || die "H1 is not a full member of VLAN $VLAN's partition ($FULL_MEMBER_PKEY)"
echo "demo: H1 is a full member of VLAN $VLAN's partition"
