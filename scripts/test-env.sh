#!/usr/bin/env bash
# test-env.sh: the servers the test suites need, throwaway and on loopback only.
#
#   scripts/test-env.sh install [PACKAGE...]   apt-get install whatever is missing of PACKAGEs (default: the
#                                             database servers, OpenSM, ibsim, infiniband-diags, promtool,
#                                             systemd-analyze, neutron-server for the Neutron import's tests),
#                                             without leaving the distribution's services running
#   scripts/test-env.sh start DIR [--no-galera]  start PostgreSQL, MariaDB and a three-node MariaDB
#                                             Galera cluster (not with --no-galera) with their data in DIR,
#                                             each on free ports, create the user afm (password afm), write
#                                             DIR/env
#   scripts/test-env.sh stop DIR              stop them all; safe to run twice or on a DIR never started
#   scripts/test-env.sh stop-server DIR postgres|mariadb    stop one of them (fast: sessions are ended)
#   scripts/test-env.sh start-server DIR postgres|mariadb   start it again, on the same port and data
#
# DIR/env holds the URLs the tests read, one KEY=VALUE line each; load it with
# `set -a; . DIR/env; set +a`:
#   AFM_TEST_POSTGRES_URL=postgres://afm:afm@127.0.0.1:<port>/postgres?sslmode=disable
#   AFM_TEST_MYSQL_URL=mysql://afm:afm@127.0.0.1:<port>/mysql
#   AFM_TEST_GALERA_URLS=<the three Galera nodes' URLs, as above, separated by blanks>
# The user afm may create and drop databases but is no superuser, so the tests cannot come to rely
# on privileges the manager will not have in production.
#
# Runs as root: PostgreSQL refuses to run as root, so it runs as the user postgres (via runuser),
# and MariaDB as the user mysql. Both come from the Debian packages that `install` sets up.
set -euo pipefail

DEFAULT_PACKAGES=(postgresql mariadb-server galera-4 rsync opensm ibsim-utils libumad2sim0 infiniband-diags prometheus systemd sqlite3
	neutron-server python3-openstackclient)

# The servers run as these users; they must be able to reach DIR (see check_reachable).
PG_USER=postgres
MYSQL_USER=mysql

# Seconds to wait for a server to accept connections or to stop, before giving up.
START_TIMEOUT=60
STOP_TIMEOUT=30
# How often a server may find its randomly drawn port taken before start gives up.
PORT_ATTEMPTS=5

die() { echo "test-env: $*" >&2; exit 1; }
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# --- install ---------------------------------------------------------------------------------

is_installed() { # is_installed PACKAGE
	[[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

# Debian's maintainer scripts start a package's service through invoke-rc.d, which asks
# /usr/sbin/policy-rc.d first; exit code 101 there means "do not start anything". A policy that is
# already in place is left as it is.
POLICY_RC_D=/usr/sbin/policy-rc.d
deny_service_starts() {
	[[ -e $POLICY_RC_D ]] && return 0
	printf '#!/bin/sh\n# test-env.sh: no service starts while it installs packages\nexit 101\n' >"$POLICY_RC_D"
	chmod 755 "$POLICY_RC_D"
	trap 'rm -f "$POLICY_RC_D"' EXIT
}

# Stops the service that PACKAGE ships, in case something started it anyway (a policy that allows
# it, socket activation). Only called for packages this run installed, so a server the machine
# already ran for other purposes is never touched.
stop_distribution_service() { # stop_distribution_service PACKAGE
	local service
	case $1 in
	postgresql) service=postgresql ;;
	mariadb-server) service=mariadb ;;
	opensm) service=opensm ;;
	docker.io) service="docker.socket docker" ;; # the image's tests run a dockerd of their own
	containerd) service=containerd ;;
	prometheus) service=prometheus ;;
	neutron-server) service=neutron-api ;; # the tests run neutron-servers of their own
	*) return 0 ;;
	esac
	if [[ -d /run/systemd/system ]]; then
		# shellcheck disable=SC2086 # one or more unit names
		systemctl stop $service >/dev/null 2>&1 || true
	else
		for service in $service; do
			[[ ! -x /etc/init.d/$service ]] || "/etc/init.d/$service" stop >/dev/null 2>&1 || true
		done
	fi
}

cmd_install() {
	local packages=("$@") missing=() p
	((${#packages[@]} > 0)) || packages=("${DEFAULT_PACKAGES[@]}")
	for p in "${packages[@]}"; do
		is_installed "$p" || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		echo "test-env: already installed: ${packages[*]}"
		return 0
	fi
	((EUID == 0)) || die "installing ${missing[*]} needs root"
	echo "test-env: installing ${missing[*]}"
	deny_service_starts
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	for p in "${missing[@]}"; do
		stop_distribution_service "$p"
	done
}

# --- helpers shared by start and stop --------------------------------------------------------

pg_bin() { # the newest installed PostgreSQL's binary directory
	local dir
	dir=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
	[[ -n $dir && -x $dir/initdb ]] || die "PostgreSQL not found under /usr/lib/postgresql (run: $0 install)"
	echo "$dir"
}

# A process counts as gone once it has exited, even while it waits as a zombie for its parent.
running() { # running PID
	[[ -n ${1:-} && -d /proc/$1 && $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# A PID read from a file is only trusted while it still runs the expected program, so a stale
# file never makes us signal an unrelated process that reused the PID.
running_as() { # running_as PID COMM
	running "$1" && [[ $(cat "/proc/$1/comm" 2>/dev/null) == "$2" ]]
}

wait_gone() { # wait_gone PID: true once PID has exited, false after STOP_TIMEOUT
	local i
	for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
		running "$1" || return 0
		sleep 0.1
	done
	return 1
}

# Ports already bound or connected on this machine, as seen in /proc (no ss or netstat needed).
port_in_use() { # port_in_use PORT
	local hex
	hex=$(printf '%04X' "$1")
	awk -v port="$hex" 'FNR > 1 { split($2, a, ":"); if (a[2] == port) found = 1 } END { exit !found }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A random port below Linux's ephemeral range (32768 and up), so outgoing connections do not take
# it in the meantime. Two environments starting at once can still draw the same port: the servers
# then fail to bind and start_* draws again.
free_port() {
	local port
	while :; do
		port=$((10000 + RANDOM % 22000))
		port_in_use "$port" || break
	done
	echo "$port"
}

bind_failed() { # bind_failed LOGFILE: did the server give up because its port was taken?
	grep -q 'Address already in use' "$1" 2>/dev/null
}

# PostgreSQL's data directory, its socket and its log live in subdirectories owned by postgres,
# MariaDB's likewise for mysql; DIR itself stays root's.
layout() { # layout DIR: sets the paths below
	PG_DATA=$1/pg
	PG_RUN=$1/pg-run
	PG_LOG=$1/pg-run/postgres.log
	MYSQL_DATA=$1/mysql
	MYSQL_RUN=$1/mysql-run
	MYSQL_SOCKET=$1/mysql-run/mysqld.sock
	MYSQL_PID=$1/mysql-run/mysqld.pid
	MYSQL_LOG=$1/mysql-run/mysqld.log
	MYSQL_PORT_FILE=$1/mysql-run/port
	PG_PORT_FILE=$1/pg-run/port
	GALERA=$1/galera # node i in $GALERA/n<i>
	ENV_FILE=$1/env
}

# --- start -----------------------------------------------------------------------------------

# The server users must be able to walk down to DIR. mktemp's 0700 directories and root's home
# are the usual obstacles: DIR itself is opened up, any parent is left alone and reported.
check_reachable() { # check_reachable DIR
	chmod 755 "$1"
	local user
	for user in "$PG_USER" "$MYSQL_USER"; do
		runuser -u "$user" -- test -x "$1" ||
			die "$user cannot reach $1: use a DIR whose parents are searchable by others (e.g. under /tmp)"
	done
}

run_postgres() { # run_postgres PORT: start the initialized server; true once it accepts connections
	runuser -u "$PG_USER" -- "$(pg_bin)/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -o "-p $1" \
		-w -t "$START_TIMEOUT" start >"$PG_RUN/pg_ctl.log" 2>&1 && echo "$1" >"$PG_PORT_FILE"
}

start_postgres() { # start_postgres DIR: sets PG_PORT
	local bin attempt
	bin=$(pg_bin)
	install -d -o "$PG_USER" -g "$PG_USER" -m 700 "$PG_DATA" "$PG_RUN"
	# --no-sync: a crash loses nothing worth keeping. Trust on the socket only: the socket
	# directory is readable by postgres alone, and TCP below needs afm's password.
	runuser -u "$PG_USER" -- "$bin/initdb" -D "$PG_DATA" -U postgres --auth-local=trust \
		--auth-host=reject -E UTF8 --locale=C.UTF-8 --no-sync --no-instructions >"$PG_RUN/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 5 "$PG_RUN/initdb.log")"
	cat >"$PG_DATA/pg_hba.conf" <<-EOF
		local all postgres trust
		host  all all 127.0.0.1/32 scram-sha-256
	EOF
	# fsync and friends off: the data is thrown away after the run, and durability costs seconds.
	cat >>"$PG_DATA/postgresql.conf" <<-EOF

		# test-env.sh
		listen_addresses = '127.0.0.1'
		unix_socket_directories = '$PG_RUN'
		fsync = off
		synchronous_commit = off
		full_page_writes = off
		max_connections = 300
	EOF
	for attempt in $(seq "$PORT_ATTEMPTS"); do
		PG_PORT=$(free_port)
		: >"$PG_LOG"
		chown "$PG_USER:" "$PG_LOG"
		run_postgres "$PG_PORT" && break
		if ! bind_failed "$PG_LOG" || ((attempt == PORT_ATTEMPTS)); then
			die "PostgreSQL did not start: $(tail -n 5 "$PG_RUN/pg_ctl.log" "$PG_LOG")"
		fi
	done
	runuser -u "$PG_USER" -- "$bin/psql" -X -q -h "$PG_RUN" -p "$PG_PORT" -U postgres -d postgres \
		-v ON_ERROR_STOP=1 -c "CREATE ROLE afm LOGIN PASSWORD 'afm' CREATEDB" >/dev/null
}

# True once the server answers on its socket; false if it exits first (or is killed here after
# START_TIMEOUT seconds without an answer).
wait_mariadb() { # wait_mariadb PID
	local i
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		mariadb-admin --no-defaults --socket="$MYSQL_SOCKET" -u root ping >/dev/null 2>&1 && return 0
		running "$1" || return 1
		sleep 0.1
	done
	echo "test-env: MariaDB did not answer within ${START_TIMEOUT}s" >>"$MYSQL_LOG"
	kill -KILL "$1" 2>/dev/null || true
	return 1
}

# --no-defaults keeps the distribution's /etc/mysql out of it: this server is described
# entirely by the options below. Each server has a temporary directory of its own: with the
# shared /tmp, a bootstrap running beside another one failed to find its own temporary tables. The InnoDB options make it small and skip the fsyncs.
mariadb_options() { # sets server_options
	server_options=(
		--user="$MYSQL_USER" --datadir="$MYSQL_DATA" --tmpdir="$MYSQL_RUN" --skip-name-resolve
		--innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0
		--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci # Debian's defaults
	)
}

run_mariadb() { # run_mariadb PORT: start the installed server; true once it answers
	local server_options
	mariadb_options
	: >"$MYSQL_LOG"
	chown "$MYSQL_USER:" "$MYSQL_LOG"
	# Every descriptor goes to the log, so the server holds no pipe of whoever called us open.
	mariadbd --no-defaults "${server_options[@]}" --bind-address=127.0.0.1 --port="$1" \
		--socket="$MYSQL_SOCKET" --pid-file="$MYSQL_PID" --log-error="$MYSQL_LOG" \
		--max-connections=300 </dev/null >>"$MYSQL_LOG" 2>&1 &
	wait_mariadb $! && echo "$1" >"$MYSQL_PORT_FILE"
}

start_mariadb() { # start_mariadb DIR: sets MYSQL_PORT
	local attempt server_options
	install -d -o "$MYSQL_USER" -g "$MYSQL_USER" -m 700 "$MYSQL_DATA" "$MYSQL_RUN"
	mariadb_options
	mariadb-install-db --no-defaults "${server_options[@]}" --auth-root-authentication-method=socket \
		--skip-test-db >"$MYSQL_RUN/install-db.log" 2>&1 ||
		die "mariadb-install-db failed: $(grep -i -m 5 -e error -e fail "$MYSQL_RUN/install-db.log" || tail -n 5 "$MYSQL_RUN/install-db.log")"
	for attempt in $(seq "$PORT_ATTEMPTS"); do
		MYSQL_PORT=$(free_port)
		run_mariadb "$MYSQL_PORT" && break
		if ! bind_failed "$MYSQL_LOG" || ((attempt == PORT_ATTEMPTS)); then
			die "MariaDB did not start: $(tail -n 5 "$MYSQL_LOG")"
		fi
	done
	# afm gets every privilege inside databases, and CREATE/DROP of databases, on all of them
	# (the tests name theirs), but none of the server-wide ones (SUPER, FILE, PROCESS, ...).
	mariadb --no-defaults --socket="$MYSQL_SOCKET" -u root <<-'EOF'
		CREATE USER 'afm'@'127.0.0.1' IDENTIFIED BY 'afm';
		CREATE USER 'afm'@'localhost' IDENTIFIED BY 'afm';
		GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, REFERENCES,
		      CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW,
		      CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER
		      ON *.* TO 'afm'@'127.0.0.1', 'afm'@'localhost';
	EOF
}

# A Galera cluster of three nodes on loopback, as Kolla deploys MariaDB: node 1 bootstraps the
# cluster, nodes 2 and 3 join it and copy its data by SST (rsync). Each node needs four ports:
# SQL, group communication, IST and SST.
galera_provider() {
	local p
	for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so; do
		[[ -f $p ]] && { echo "$p"; return 0; }
	done
	die "Galera's provider library not found (run: $0 install)"
}

galera_node_up() { # galera_node_up NODE_DIR PID: true once the node is Synced
	local i state
	for ((i = 0; i < START_TIMEOUT * 2 * 10; i++)); do
		state=$(mariadb --no-defaults --socket="$1/sock" -u root -N -B \
			-e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | awk '{print $2}') || true
		[[ $state == Synced ]] && return 0
		running "$2" || return 1
		sleep 0.1
	done
	return 1
}

start_galera() { # start_galera DIR: sets GALERA_PORTS (the SQL ports)
	local provider i n attempt gcomm node
	local -a sql gm ist sst
	provider=$(galera_provider)
	for attempt in $(seq "$PORT_ATTEMPTS"); do
		sql=() gm=() ist=() sst=()
		for i in 1 2 3; do
			sql+=("$(free_port)") gm+=("$(free_port)") ist+=("$(free_port)") sst+=("$(free_port)")
		done
		gcomm="gcomm://127.0.0.1:${gm[0]},127.0.0.1:${gm[1]},127.0.0.1:${gm[2]}"
		rm -rf "$GALERA"
		install -d -m 755 "$GALERA"
		for i in 0 1 2; do
			n=$((i + 1))
			node=$GALERA/n$n
			install -d -o "$MYSQL_USER" -g "$MYSQL_USER" -m 700 "$node" "$node/data"
			cat >"$node/my.cnf" <<-EOF
				[mysqld]
				datadir=$node/data
				tmpdir=$node
				socket=$node/sock
				pid-file=$node/pid
				log-error=$node/error.log
				port=${sql[i]}
				bind-address=127.0.0.1
				skip-name-resolve
				character-set-server=utf8mb4
				collation-server=utf8mb4_general_ci
				innodb-log-file-size=16M
				innodb-flush-log-at-trx-commit=0
				innodb-doublewrite=0
				max-connections=300
				binlog_format=ROW
				default_storage_engine=InnoDB
				innodb_autoinc_lock_mode=2
				wsrep_on=ON
				wsrep_provider=$provider
				wsrep_cluster_name=afmtest
				wsrep_cluster_address=$gcomm
				wsrep_node_address=127.0.0.1:${gm[i]}
				wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:${gm[i]};ist.recv_addr=127.0.0.1:${ist[i]}"
				wsrep_sst_receive_address=127.0.0.1:${sst[i]}
				wsrep_sst_method=rsync
				wsrep_node_name=n$n
			EOF
		done
		mariadb-install-db --defaults-file="$GALERA/n1/my.cnf" --user="$MYSQL_USER" \
			--auth-root-authentication-method=socket --skip-test-db >"$GALERA/install-db.log" 2>&1 ||
			die "mariadb-install-db (Galera) failed: $(tail -n 5 "$GALERA/install-db.log")"
		local ok=1
		for n in 1 2 3; do
			node=$GALERA/n$n
			local bootstrap=()
			((n == 1)) && bootstrap=(--wsrep-new-cluster)
			# A joiner copies node 1 by SST first, which takes seconds.
			mariadbd --defaults-file="$node/my.cnf" --user="$MYSQL_USER" "${bootstrap[@]}" \
				</dev/null >>"$node/error.log" 2>&1 &
			if ! galera_node_up "$node" $!; then
				ok=0
				break
			fi
		done
		((ok)) && break
		bind_failed "$GALERA/n$n/error.log" && ((attempt < PORT_ATTEMPTS)) || 
			die "Galera node $n did not join: $(tail -n 5 "$GALERA/n$n/error.log")"
		stop_galera
	done
	mariadb --no-defaults --socket="$GALERA/n1/sock" -u root <<-'EOF'
		CREATE USER 'afm'@'127.0.0.1' IDENTIFIED BY 'afm';
		CREATE USER 'afm'@'localhost' IDENTIFIED BY 'afm';
		GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, REFERENCES,
		      CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW,
		      CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER
		      ON *.* TO 'afm'@'127.0.0.1', 'afm'@'localhost';
	EOF
	GALERA_PORTS=("${sql[@]}")
}

cmd_start() { # cmd_start DIR
	[[ -n ${1:-} ]] || usage
	((EUID == 0)) || die "start needs root (it runs the servers as $PG_USER and $MYSQL_USER)"
	mkdir -p "$1"
	local dir
	dir=$(cd "$1" && pwd)
	layout "$dir"
	[[ ! -e $PG_DATA && ! -e $MYSQL_DATA ]] || die "$dir already holds an environment: stop it and use a new DIR"
	check_reachable "$dir"
	# A start that fails half-way stops what it had started.
	trap 'cmd_stop "$dir" >/dev/null 2>&1' EXIT
	# cd: the servers (and runuser) start in DIR, which their users can read, not in the caller's.
	cd "$dir"
	start_postgres "$dir"
	start_mariadb "$dir"
	GALERA_PORTS=()
	[[ ${2:-} == --no-galera ]] || start_galera "$dir"
	trap - EXIT
	local p urls=()
	for p in "${GALERA_PORTS[@]}"; do urls+=("mysql://afm:afm@127.0.0.1:$p/mysql"); done
	{
		echo "AFM_TEST_POSTGRES_URL=postgres://afm:afm@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
		echo "AFM_TEST_MYSQL_URL=mysql://afm:afm@127.0.0.1:$MYSQL_PORT/mysql"
		((${#urls[@]} == 0)) || echo "AFM_TEST_GALERA_URLS=\"${urls[*]}\""
	} >"$ENV_FILE.tmp"
	mv "$ENV_FILE.tmp" "$ENV_FILE"
	echo "test-env: PostgreSQL on 127.0.0.1:$PG_PORT, MariaDB on 127.0.0.1:$MYSQL_PORT," \
		"Galera on 127.0.0.1:${GALERA_PORTS[*]:-(not started)}; see $ENV_FILE"
}

# --- stop ------------------------------------------------------------------------------------

stop_postgres() { # stop_postgres [MODE]: immediate (the default) or fast
	local pid
	[[ -f $PG_DATA/postmaster.pid ]] || return 0
	pid=$(head -n 1 "$PG_DATA/postmaster.pid")
	running_as "$pid" postgres || return 0
	# Immediate: no checkpoint, the data is thrown away anyway.
	(cd / && runuser -u "$PG_USER" -- "$(pg_bin)/pg_ctl" -D "$PG_DATA" -m "${1:-immediate}" -w \
		-t "$STOP_TIMEOUT" stop >/dev/null 2>&1) || true
	wait_gone "$pid" && return 0
	echo "test-env: PostgreSQL ($pid) did not stop; killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

stop_mariadb() {
	local pid
	[[ -f $MYSQL_PID ]] || return 0
	pid=$(<"$MYSQL_PID")
	running_as "$pid" mariadbd || return 0
	kill -TERM "$pid" 2>/dev/null || true
	wait_gone "$pid" && return 0
	echo "test-env: MariaDB ($pid) did not stop; killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

stop_galera() {
	local n pid
	for n in 3 2 1; do
		[[ -f $GALERA/n$n/pid ]] || continue
		pid=$(<"$GALERA/n$n/pid")
		running_as "$pid" mariadbd || continue
		kill -TERM "$pid" 2>/dev/null || true
		wait_gone "$pid" && continue
		echo "test-env: Galera node $n ($pid) did not stop; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	done
}

cmd_stop() { # cmd_stop DIR
	[[ -n ${1:-} ]] || usage
	[[ -d $1 ]] || return 0
	layout "$1"
	rm -f "$ENV_FILE"
	stop_postgres
	stop_mariadb
	stop_galera
}

# --- one server at a time, for the tests of database outages ---------------------------------

cmd_server() { # cmd_server stop|start DIR postgres|mariadb
	local verb=$1 dir=${2:-} server=${3:-}
	[[ -n $dir && -d $dir ]] || usage
	dir=$(cd "$dir" && pwd)
	layout "$dir"
	cd "$dir"
	case $verb/$server in
	stop/postgres) stop_postgres fast ;;
	stop/mariadb) stop_mariadb ;;
	start/postgres) run_postgres "$(<"$PG_PORT_FILE")" || die "PostgreSQL did not start: $(tail -n 5 "$PG_LOG")" ;;
	start/mariadb) run_mariadb "$(<"$MYSQL_PORT_FILE")" || die "MariaDB did not start: $(tail -n 5 "$MYSQL_LOG")" ;;
	*) usage ;;
	esac
}

# --- main ------------------------------------------------------------------------------------

case ${1:-} in
install) shift; cmd_install "$@" ;;
start) cmd_start "${2:-}" "${3:-}" ;;
stop) cmd_stop "${2:-}" ;;
stop-server) cmd_server stop "${2:-}" "${3:-}" ;;
start-server) cmd_server start "${2:-}" "${3:-}" ;;
*) usage ;;
esac
