# deploy/lib.sh: shell functions shared by deploy/local-cluster, tests/run
# and the integration tests (tests/integration/lib.sh), so that making a
# site, starting and stopping grantd and sshd, and talking to them over ssh
# and git is written once.
#
# Source it from bash; it sets no options of its own and never exits the
# caller: every function returns non-zero on failure and says why on
# stderr.  Processes are started in their own session (setsid) with their
# pid in a file in the site directory; stopping checks that the pid still
# belongs to the process it started (its command line names the site's
# file), so a stale pid file never kills a stranger.
#
# Layout of a site directory DIR (gd_site_config writes it):
#   DIR/grantd.conf   DIR/node.key  DIR/node.pub   DIR/data/  DIR/repos/
#   DIR/run/{user,admin}.sock   DIR/grantd.log  DIR/grantd.pid
#   DIR/ssh/{sshd_config,ssh_host_ed25519_key,sshd.pid,keysdir}  DIR/sshd.log

GD_ROOT=${GD_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
GD_BIN=${GD_BIN:-$GD_ROOT/build/bin}

# Debian 12 packages needed to build, run and test grantd: every tool a test
# needs is here, since in CI a test that would skip for lack of one fails
# (tests/run).  python3-zmq: the stand-in peers and raw clients
# (repl_rogue.py, test_badinput); python3-cryptography: Ed25519 for the
# stand-in that signs as the site it plays; iptables and iproute2:
# partitions on
# loopback; strace: the order of fsyncs and replies; libtsan2: the
# ThreadSanitizer tree; gitolite3: grantd beside gitolite (test_gitolite);
# libmicrohttpd-dev, prometheus (promtool): the metrics endpoint and its
# scrape test; libsystemd-dev: sd_notify; mandoc: the man pages lint;
# systemd and man-db: systemd-analyze verify and security of the unit
# (whose Documentation= man pages verify looks up with man); dpkg-dev,
# debhelper and lintian: deploy/package and test_package (the .deb built,
# checked, installed; docs/packaging.md); libcurl4-openssl-dev: grant-log
# reads a site's HTTP push log (http and https); libssl-dev: libcrypto's
# SHA-256 (common/sha256.h).
GD_PACKAGES=(build-essential cmake pkg-config libzmq3-dev libprotobuf-c-dev
	protobuf-c-compiler liboath-dev oathtool librocksdb-dev libgit2-dev
	libinih-dev libcjson-dev libqrencode-dev libsodium-dev libcmocka-dev
	openssh-server openssh-client git clang libclang-rt-14-dev libtsan2
	python3 python3-zmq python3-cryptography iptables iproute2 strace gitolite3
	libmicrohttpd-dev libsystemd-dev prometheus mandoc systemd man-db
	dpkg-dev debhelper lintian libcurl4-openssl-dev libssl-dev)

# Seconds to wait for a node or sshd to come up or go down.  Sanitizer
# builds start slower; callers may raise it.
GD_TIMEOUT=${GD_TIMEOUT:-30}

gd_say() { printf '%s\n' "$*" >&2; }
gd_err() { printf 'error: %s\n' "$*" >&2; return 1; }

# gd_now_ms: wall clock in milliseconds.
gd_now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# gd_wait_for SECONDS CMD...: run CMD until it succeeds or SECONDS pass
# (Redis' wait_for_condition).  Polls every 20 ms, so it costs nothing when
# the condition is already true.
gd_wait_for() {
	local secs=$1; shift
	local deadline=$(( $(gd_now_ms) + secs * 1000 ))
	while :; do
		"$@" && return 0
		(( $(gd_now_ms) >= deadline )) && return 1
		sleep 0.02
	done
}

# ---- packages and builds -------------------------------------------------

# gd_missing_packages: print the packages of GD_PACKAGES not installed.
gd_missing_packages() {
	local p st
	for p in "${GD_PACKAGES[@]}"; do
		st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) || st=
		[[ $st == ii* ]] || echo "$p"
	done
}

# gd_install_packages: apt-get install what is missing (nothing when all
# is there, so it needs no network on a prepared machine).
gd_install_packages() {
	local missing
	missing=$(gd_missing_packages | tr '\n' ' ')
	[[ -z ${missing// } ]] && return 0
	gd_say "installing missing packages: $missing"
	if [[ $(id -u) != 0 ]]; then
		gd_err "need root to install packages: $missing"
		return 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086 # one word per package
	apt-get update -q >&2 &&
		apt-get install -y -q --no-install-recommends $missing >&2
}

# gd_build DIR [CMAKE ARGS...]: configure (RelWithDebInfo unless the args
# say otherwise) and build the tree at GD_ROOT into DIR with two jobs.
gd_build() {
	local dir=$1; shift
	cmake -S "$GD_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" \
		>&2 && cmake --build "$dir" -j2 >&2
}

# GD_PROGRAMS: the programs a site runs (what deploy/local-cluster needs).
GD_PROGRAMS=(grantd grantctl grant-shell grant-keys grant-keys-list grant-hook)

# gd_build_programs DIR [CMAKE ARGS...]: like gd_build, but only the
# programs of GD_PROGRAMS that the tree defines (not the tests and
# benchmarks, so a half-written test elsewhere does not stop a cluster).
gd_build_programs() {
	local dir=$1 t targets=() have; shift
	cmake -S "$GD_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >&2 || return 1
	have=$(cmake --build "$dir" --target help 2>/dev/null) || return 1
	for t in "${GD_PROGRAMS[@]}"; do
		grep -qx "\.\.\. $t" <<<"$have" && targets+=("$t")
	done
	((${#targets[@]})) || { gd_err "no grantd programs defined in $GD_ROOT"; return 1; }
	cmake --build "$dir" -j2 --target "${targets[@]}" >&2
}

# ---- processes -------------------------------------------------------------

# gd_alive PID [TEXT]: PID runs (not a zombie) and, when TEXT is given, its
# command line contains TEXT.
gd_alive() {
	local pid=$1 text=${2-} stat state
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	state=${stat##*) }
	state=${state%% *}
	[[ $state == Z || $state == X ]] && return 1
	if [[ -n $text ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
			grep -qF -- "$text" || return 1
	fi
	return 0
}

# gd_pidfile_alive FILE TEXT: the pid in FILE runs and is ours.
gd_pidfile_alive() {
	local pid
	[[ -f $1 ]] || return 1
	pid=$(<"$1")
	gd_alive "$pid" "$2"
}

# gd_stop_pid PID TEXT [SECONDS]: SIGTERM, wait up to SECONDS (default
# GD_TIMEOUT), then SIGKILL.  Returns 0 once the process is gone, 1 if it
# had to be killed.
gd_stop_pid() {
	local pid=$1 text=$2 secs=${3:-$GD_TIMEOUT} rc=0
	gd_alive "$pid" "$text" || return 0
	# a stopped (SIGSTOP) process is resumed first, so that it sees the
	# SIGTERM.  Never a SIGCONT after the SIGTERM: a sanitizer build ends
	# with LeakSanitizer stopping every thread (PTRACE_ATTACH queues a
	# SIGSTOP); a SIGCONT landing then discards that SIGSTOP, and the
	# leak check waits forever for a thread that never stops.
	kill -CONT "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	if ! gd_wait_for "$secs" eval '! gd_alive '"$pid"; then
		gd_say "pid $pid ($text) did not stop within ${secs}s: SIGKILL"
		# the caller's report of a stuck process (the tests' lib.sh:
		# every thread's stack), before SIGKILL takes it away
		if declare -F gd_stuck_report >/dev/null; then
			gd_stuck_report "$pid" >&2
		fi
		kill -KILL "$pid" 2>/dev/null
		gd_wait_for 10 eval '! gd_alive '"$pid"
		rc=1
	fi
	wait "$pid" 2>/dev/null # reap it if it is our child
	return $rc
}

# gd_kill9_pid PID TEXT: SIGKILL and wait until it is gone; 1 if it still
# runs 10 s later.
gd_kill9_pid() {
	local pid=$1 text=$2 rc=0
	gd_alive "$pid" "$text" || return 0
	kill -KILL "$pid" 2>/dev/null
	gd_wait_for 10 eval '! gd_alive '"$pid" || rc=1
	wait "$pid" 2>/dev/null
	return $rc
}

# gd_port_open ADDR PORT: something accepts TCP connections there.
gd_port_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# gd_port_free ADDR PORT: nothing listens there.
gd_port_free() { ! gd_port_open "$1" "$2"; }

# ---- sites -----------------------------------------------------------------

# gd_site_keygen DIR: make DIR/node.key with `grantctl keygen` (once) and
# write its public key to DIR/node.pub; prints the public key.
gd_site_keygen() {
	local dir=$1 out pub
	mkdir -p "$dir" || return 1
	if [[ ! -s $dir/node.key || ! -s $dir/node.pub ]]; then
		rm -f "$dir/node.key" "$dir/node.pub"
		out=$("$GD_BIN/grantctl" keygen "$dir/node.key") ||
			{ gd_err "grantctl keygen $dir/node.key failed"; return 1; }
		pub=$(printf '%s\n' "$out" | awk 'NF { w = $NF } END { print w }')
		[[ ${#pub} == 40 ]] ||
			{ gd_err "grantctl keygen printed no Z85 public key: $out"; return 1; }
		printf '%s\n' "$pub" >"$dir/node.pub"
	fi
	cat "$dir/node.pub"
}

# gd_site_config DIR SITE PUBLISH SYNC [KEY=VALUE...]: write
# DIR/grantd.conf (SPEC 4) for SITE with its data, repositories and sockets
# under DIR.  KEY=VALUE pairs override [policy] keys, or [node] keys when
# KEY is log_level, oplog_retention or repo_dir (default DIR/repos).  Peers
# are appended with gd_site_add_peer.  GD_LOG_LEVEL in the environment is
# the default log_level (info), e.g. debug while a test's failure is read.
gd_site_config() {
	local dir=$1 site=$2 publish=$3 sync=$4; shift 4
	local -A pol=([grant_default]=24h [grant_max]=30d [totp_window]=1
		[hotp_lookahead]=20 [lockout_failures]=5 [lockout_window]=15m)
	local log_level=${GD_LOG_LEVEL:-info} retention= repo_dir=$dir/repos kv k
	for kv in "$@"; do
		k=${kv%%=*}
		case $k in
		log_level) log_level=${kv#*=} ;;
		repo_dir) repo_dir=${kv#*=} ;;
		oplog_retention) retention=${kv#*=} ;;
		*) pol[$k]=${kv#*=} ;;
		esac
	done
	mkdir -p "$dir/data" "$repo_dir" "$dir/run" || return 1
	gd_site_keygen "$dir" >/dev/null || return 1
	{
		echo "; grantd site $site, written by deploy/lib.sh"
		echo "[node]"
		echo "site = $site"
		echo "data_dir = $dir/data"
		echo "repo_dir = $repo_dir"
		echo "user_socket = $dir/run/user.sock"
		echo "admin_socket = $dir/run/admin.sock"
		echo "publish = $publish"
		echo "sync = $sync"
		echo "secret_key = $dir/node.key"
		echo "log_level = $log_level"
		[[ -n $retention ]] && echo "oplog_retention = $retention"
		echo
		echo "[policy]"
		for k in grant_default grant_max totp_window hotp_lookahead \
			lockout_failures lockout_window; do
			echo "$k = ${pol[$k]}"
		done
		for k in "${!pol[@]}"; do
			case $k in
			grant_default|grant_max|totp_window|hotp_lookahead|lockout_failures|lockout_window) ;;
			*) echo "$k = ${pol[$k]}" ;;
			esac
		done
	} >"$dir/grantd.conf.new" && mv "$dir/grantd.conf.new" "$dir/grantd.conf"
}

# gd_site_add_peer DIR NAME PUBLISH SYNC PUBLIC_KEY [VERIFIER_KEY]: append a
# [peer NAME].  Its verifier_key (the signing key its operations are
# checked with) is VERIFIER_KEY, or, when the site NAME's directory is a
# sibling of DIR (as every script here lays sites out) and holds its
# node.key with that PUBLIC_KEY in node.pub, the one `grantctl log key`
# derives from it; otherwise none (the node then warns that NAME's
# operations go unchecked).  GD_VERIFIER_KEYS=0: none at all (a config an
# older release must read: it knows no verifier_key).
gd_site_add_peer() {
	local vkey=${6:-} pdir
	pdir=$(dirname "$1")/$2
	if [[ ${GD_VERIFIER_KEYS:-1} == 0 ]]; then
		vkey=
	elif [[ -z $vkey && -s $pdir/node.key && -s $pdir/node.pub &&
		$(<"$pdir/node.pub") == "$5" ]]; then
		vkey=$("$GD_BIN/grantctl" log key --key-file "$pdir/node.key" \
			--site "$2") || { gd_err "grantctl log key for $2 failed"; return 1; }
	fi
	printf '\n[peer %s]\npublish = %s\nsync = %s\npublic_key = %s\n' \
		"$2" "$3" "$4" "$5" >>"$1/grantd.conf"
	[[ -n $vkey ]] && printf 'verifier_key = %s\n' "$vkey" >>"$1/grantd.conf"
	return 0
}

# gd_grantctl DIR ARGS...: grantctl against the site in DIR.
gd_grantctl() {
	local dir=$1; shift
	"$GD_BIN/grantctl" --config "$dir/grantd.conf" "$@"
}

# gd_grantd_running DIR: the site's grantd runs.
gd_grantd_running() {
	gd_pidfile_alive "$1/grantd.pid" "$1/grantd.conf"
}

# gd_grantd_ready DIR: the site's node answers `grantctl status`.
gd_grantd_ready() {
	gd_grantctl "$1" status >/dev/null 2>&1
}

# gd_grantd_start DIR: start grantd for the site in the background (its
# stderr appended to DIR/grantd.log) and wait until `grantctl status`
# answers.  On failure prints the end of the log.
gd_grantd_start() {
	local dir=$1 pid deadline
	if gd_grantd_running "$dir"; then
		gd_err "grantd for $dir already runs (pid $(<"$dir/grantd.pid"))"
		return 1
	fi
	echo "---- start $(date -u +%FT%TZ)" >>"$dir/grantd.log"
	rm -f "$dir/grantd.pid" "$dir/grantd.exit"
	# Not a child of the caller: a small detached shell starts grantd,
	# writes its pid, waits for it and writes its exit status to
	# DIR/grantd.exit (gd_grantd_exit_status).  A long-lived child of the
	# caller's shell would sit in bash's job table, and bash 5.2 can lose
	# a later foreground command whose pid the kernel reused (it then
	# waits forever); tests start thousands of processes, so pids wrap.
	(setsid bash -c '"$1" --config "$2" </dev/null >>"$3" 2>&1 &
		echo $! >"$4.new" && mv "$4.new" "$4"
		wait $!
		echo $? >"$5.new" && mv "$5.new" "$5"' grantd-wrapper \
		"$GD_BIN/grantd" "$dir/grantd.conf" "$dir/grantd.log" \
		"$dir/grantd.pid" "$dir/grantd.exit" </dev/null >/dev/null 2>&1 &)
	deadline=$(( $(gd_now_ms) + GD_TIMEOUT * 1000 ))
	while [[ ! -s $dir/grantd.pid ]]; do
		if (( $(gd_now_ms) >= deadline )); then
			gd_err "grantd ($dir) was not started within ${GD_TIMEOUT}s"
			return 1
		fi
		sleep 0.01
	done
	pid=$(<"$dir/grantd.pid")
	while ! gd_grantd_ready "$dir"; do
		if ! gd_alive "$pid"; then
			gd_err "grantd ($dir) exited during start-up (status $(gd_grantd_exit_status "$dir")); end of $dir/grantd.log:"
			tail -n 20 "$dir/grantd.log" >&2
			return 1
		fi
		if (( $(gd_now_ms) >= deadline )); then
			gd_err "grantd ($dir) did not answer 'grantctl status' within ${GD_TIMEOUT}s; end of $dir/grantd.log:"
			tail -n 20 "$dir/grantd.log" >&2
			return 1
		fi
		sleep 0.02
	done
}

# gd_grantd_exit_status DIR: the exit status of the site's last grantd
# once it has exited (128+N for signal N), as its starter recorded it;
# waits up to 10 s for it; prints "?" when there is none.
gd_grantd_exit_status() {
	if gd_wait_for 10 test -s "$1/grantd.exit"; then
		cat "$1/grantd.exit"
	else
		echo "?"
	fi
}

# gd_grantd_stop DIR: SIGTERM, wait, SIGKILL after GD_TIMEOUT.
gd_grantd_stop() {
	local dir=$1
	[[ -f $dir/grantd.pid ]] || return 0
	gd_stop_pid "$(<"$dir/grantd.pid")" "$dir/grantd.conf"
	local rc=$?
	rm -f "$dir/grantd.pid"
	return $rc
}

# gd_grantd_kill9 DIR: SIGKILL the site's grantd (a crash); 1 if it
# still runs.  The pid file goes either way: read it first to check.
gd_grantd_kill9() {
	local dir=$1 rc
	[[ -f $dir/grantd.pid ]] || return 0
	gd_kill9_pid "$(<"$dir/grantd.pid")" "$dir/grantd.conf"
	rc=$?
	rm -f "$dir/grantd.pid"
	return $rc
}

# gd_digest DIR: the state digest from `grantctl status --json`.
gd_digest() {
	local json
	json=$(gd_grantctl "$1" status --json) || return 1
	gd_status_digest "$json"
}

# gd_status_digest JSON: the top-level "digest" of a `grantctl status
# --json` document, without starting python (cheap enough to poll).
# Every peer object carries a "digest" too; the node's own comes first.
gd_status_digest() {
	local re='"digest"[[:space:]]*:[[:space:]]*"([0-9a-fA-F]+)"'
	[[ $1 =~ $re ]] || return 1
	echo "${BASH_REMATCH[1]}"
}

# gd_status_syncing JSON: the node says it is still catching up.
gd_status_syncing() {
	[[ $1 =~ \"syncing\"[[:space:]]*:[[:space:]]*true ]]
}

# gd_status_applied JSON: the "applied" object (operations applied per
# origin) of a `grantctl status --json` document, as text.
gd_status_applied() {
	local re='"applied"[[:space:]]*:[[:space:]]*(\{[^}]*\})'
	[[ $1 =~ $re ]] || return 1
	echo "${BASH_REMATCH[1]}"
}

# gd_converged DIR...: every site in DIR... answers, none is catching up,
# and all report the same state digest (SPEC 2.3) and have applied the
# same operations (some, such as failed attempts, are outside the digest).
# Cheap: one grantctl per site, no python; poll it with gd_wait_for.
gd_converged() {
	local dir json d first= a firsta=
	for dir in "$@"; do
		json=$(gd_grantctl "$dir" status --json 2>/dev/null) || return 1
		gd_status_syncing "$json" && return 1
		d=$(gd_status_digest "$json") || return 1
		a=$(gd_status_applied "$json") || return 1
		[[ -z $first ]] && first=$d firsta=$a
		[[ $d == "$first" && $a == "$firsta" ]] || return 1
	done
	return 0
}

# gd_peers_connected DIR: the node at DIR hears every configured peer.
gd_peers_connected() {
	local json
	json=$(gd_grantctl "$1" status --json 2>/dev/null) || return 1
	[[ $json != *'"connected":false'* && $json != *'"connected": false'* ]]
}

# gd_grantd_pause DIR / gd_grantd_resume DIR: SIGSTOP / SIGCONT the
# site's grantd (a frozen machine: its sockets stay open, nothing moves).
gd_grantd_pause() {
	gd_grantd_running "$1" || return 1
	kill -STOP "$(<"$1/grantd.pid")"
}
gd_grantd_resume() {
	gd_grantd_running "$1" || return 1
	kill -CONT "$(<"$1/grantd.pid")"
}

# ---- sshd ------------------------------------------------------------------

# gd_sshd_start DIR ADDR PORT [GITOLITE_USER]: run an sshd for the site on
# ADDR:PORT that takes its keys from grant-keys (AuthorizedKeysCommand) and
# lets root in with forced commands only.  With GITOLITE_USER, it lets in
# only that account, with the keys gitolite writes to its
# ~/.ssh/authorized_keys, and gives the session GRANTD_CONFIG (sshd's
# SetEnv) as docs/gitolite.md sets it up.  sshd refuses an AuthorizedKeysCommand under
# a group- or world-writable directory (such as /tmp, where a CI clone may
# live), so a wrapper that execs grant-keys goes into a fresh root-owned
# 0755 directory under /run, removed by gd_sshd_stop.  (A wrapper, not a
# copy, so grant-keys still finds grant-shell beside itself.)
# $GD_SSHD_EXTRA, when set, is appended to its sshd_config (bench/run-e2e).
gd_sshd_start() {
	local dir=$1 addr=$2 port=$3 gl_user=${4-} sd=$1/ssh keysdir pid deadline
	local auth
	mkdir -p "$sd" /run/sshd || return 1
	chmod 755 /run/sshd
	if gd_sshd_running "$dir"; then
		gd_err "sshd for $dir already runs (pid $(<"$sd/sshd.pid"))"
		return 1
	fi
	if [[ ! -s $sd/ssh_host_ed25519_key ]]; then
		ssh-keygen -q -t ed25519 -N '' -C "grantd-$addr" \
			-f "$sd/ssh_host_ed25519_key" >/dev/null || return 1
	fi
	gd_sshd_rm_keysdir "$dir"
	keysdir=$(mktemp -d /run/grantd-ssh.XXXXXX) || return 1
	chown root:root "$keysdir" 2>/dev/null
	chmod 755 "$keysdir"
	echo "$keysdir" >"$sd/keysdir"
	printf '#!/bin/sh\nexec %q "$@"\n' "$GD_BIN/grant-keys" >"$keysdir/grant-keys"
	chmod 755 "$keysdir/grant-keys"
	if [[ -n $gl_user ]]; then
		auth="AllowUsers $gl_user
PermitRootLogin no
AuthorizedKeysFile .ssh/authorized_keys
SetEnv GRANTD_CONFIG=$dir/grantd.conf"
	else
		auth="PermitRootLogin forced-commands-only
AuthorizedKeysFile none
AuthorizedKeysCommand $keysdir/grant-keys --config $dir/grantd.conf %u %f
AuthorizedKeysCommandUser root"
	fi
	cat >"$sd/sshd_config" <<EOF
# sshd for grantd site $dir, written by deploy/lib.sh
ListenAddress $addr:$port
HostKey $sd/ssh_host_ed25519_key
PidFile $sd/sshd.pid
$auth
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
AllowTcpForwarding no
X11Forwarding no
PermitTTY no
MaxStartups 100:30:200
MaxSessions 20
LogLevel VERBOSE
${GD_SSHD_EXTRA:-}
EOF
	if ! /usr/sbin/sshd -t -f "$sd/sshd_config" 2>"$sd/sshd-t.err"; then
		gd_err "sshd -t -f $sd/sshd_config: $(cat "$sd/sshd-t.err")"
		return 1
	fi
	if ! gd_port_free "$addr" "$port"; then
		gd_err "$addr:$port is already taken"
		return 1
	fi
	echo "---- start $(date -u +%FT%TZ)" >>"$dir/sshd.log"
	# detached, not a child of the caller (see gd_grantd_start)
	(setsid /usr/sbin/sshd -D -e -f "$sd/sshd_config" \
		</dev/null >>"$dir/sshd.log" 2>&1 &
	echo $! >"$sd/sshd.pid.ours")
	pid=$(<"$sd/sshd.pid.ours")
	deadline=$(( $(gd_now_ms) + GD_TIMEOUT * 1000 ))
	while ! gd_port_open "$addr" "$port"; do
		if ! gd_alive "$pid"; then
			wait "$pid" 2>/dev/null
			gd_err "sshd ($dir) exited during start-up; end of $dir/sshd.log:"
			tail -n 20 "$dir/sshd.log" >&2
			return 1
		fi
		if (( $(gd_now_ms) >= deadline )); then
			gd_err "sshd ($dir) did not listen on $addr:$port within ${GD_TIMEOUT}s"
			return 1
		fi
		sleep 0.02
	done
}

# gd_sshd_running DIR
gd_sshd_running() {
	gd_pidfile_alive "$1/ssh/sshd.pid.ours" "$1/ssh/sshd_config"
}

gd_sshd_rm_keysdir() {
	local f=$1/ssh/keysdir k
	[[ -f $f ]] || return 0
	k=$(<"$f")
	[[ $k == /run/grantd-ssh.* && -d $k ]] && rm -rf -- "$k"
	rm -f "$f"
}

# gd_sshd_stop DIR: stop the site's sshd and remove its /run directory.
gd_sshd_stop() {
	local dir=$1 rc=0
	if [[ -f $dir/ssh/sshd.pid.ours ]]; then
		gd_stop_pid "$(<"$dir/ssh/sshd.pid.ours")" "$dir/ssh/sshd_config" 10
		rc=$?
		rm -f "$dir/ssh/sshd.pid.ours"
	fi
	gd_sshd_rm_keysdir "$dir"
	return $rc
}

# gd_known_hosts DIR ADDR PORT FILE: write FILE naming the site's host key,
# so clients can check it (StrictHostKeyChecking=yes).
gd_known_hosts() {
	local key
	key=$(cut -d' ' -f1,2 "$1/ssh/ssh_host_ed25519_key.pub") || return 1
	if [[ $3 == 22 ]]; then
		echo "$2 $key"
	else
		echo "[$2]:$3 $key"
	fi >"$4"
}

# ---- clients ---------------------------------------------------------------

# gd_user_key FILE: make an ed25519 key pair FILE, FILE.pub (once).
gd_user_key() {
	[[ -s $1 && -s $1.pub ]] && return 0
	rm -f "$1" "$1.pub"
	ssh-keygen -q -t ed25519 -N '' -C "$(basename "$1")" -f "$1" >/dev/null
}

# gd_ssh_opts SRCIP KEY: ssh options for a client at SRCIP (127.x.y.z
# addresses play different client IPs) logging in with KEY.
gd_ssh_opts() {
	printf '%s ' -F /dev/null -b "$1" -i "$2" -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o BatchMode=yes \
		-o IdentitiesOnly=yes -o LogLevel=ERROR -o ConnectTimeout=10
}

# gd_ssh SRCIP PORT KEY ADDR COMMAND...: run COMMAND at the site's sshd
# (so grant-shell sees it in SSH_ORIGINAL_COMMAND) from SRCIP.
gd_ssh() {
	local src=$1 port=$2 key=$3 addr=$4; shift 4
	# shellcheck disable=SC2046
	ssh $(gd_ssh_opts "$src" "$key") -p "$port" "root@$addr" "$@" </dev/null
}

# gd_git_ssh_command SRCIP KEY: a GIT_SSH_COMMAND for git push/clone from
# SRCIP with KEY; use ssh://root@ADDR:PORT/REPO URLs with it.
gd_git_ssh_command() {
	echo "ssh $(gd_ssh_opts "$1" "$2")"
}

# gd_git SRCIP KEY GIT-ARGS...: git with ssh from SRCIP with KEY, isolated
# from the caller's git configuration.
gd_git() {
	local src=$1 key=$2; shift 2
	GIT_SSH_COMMAND=$(gd_git_ssh_command "$src" "$key") \
	GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
	GIT_AUTHOR_NAME=grantd-test GIT_AUTHOR_EMAIL=test@grantd.invalid \
	GIT_COMMITTER_NAME=grantd-test GIT_COMMITTER_EMAIL=test@grantd.invalid \
	GIT_TERMINAL_PROMPT=0 \
		git -c init.defaultBranch=main -c advice.detachedHead=false "$@" </dev/null
}

# gd_base32_secret: a fresh random 160-bit OTP secret in base32.
gd_base32_secret() {
	head -c 20 /dev/urandom | base32 | tr -d '=\n'
	echo
}
