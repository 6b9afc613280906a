# tests/integration/lib.sh: helpers for the integration tests.
#
# A test is a standalone bash script, tests/integration/test_NAME.sh, that
# sources this file, starts the real grantd (and sshd, git, oathtool) with
# t_site_up, checks things with the t_expect/t_check helpers, and ends with
# t_done.  It reads the binaries from $GD_BIN (ctest sets it; default
# build/bin), works in its own temporary directory, and uses a loopback
# address and ports derived from its name, so `ctest -j` runs tests side by
# side.  Clients play different hosts by binding different source
# addresses (127.0.7.7, 127.0.7.8, ...): every 127/8 address is local.
#
# Nothing here sleeps for a fixed time: conditions are polled to a deadline
# (gd_wait_for).  Every check prints an "ok" or "FAIL" line; t_done prints
# "N passed, N failed", checks `grantctl verify` at every running node,
# stops the node (which must exit cleanly on SIGTERM), fails on any
# sanitizer report in the node's log (or a restart that found its stored
# digest apart from its records), and exits non-zero if anything failed.
# t_expect_converged checks `grantctl verify` at every site it compares.
# GD_KEEP=1 keeps the temporary directory; GD_LOG_LEVEL=debug (deploy/lib.sh)
# makes the sites log at debug level, for reading a failure.

set -u
set -o pipefail

T_NAME=$(basename "$0" .sh)
T_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GD_ROOT=$(cd "$T_HERE/../.." && pwd)
# shellcheck source=../../deploy/lib.sh
. "$GD_ROOT/deploy/lib.sh"
GD_BIN=$(cd "$GD_BIN" 2>/dev/null && pwd) || {
	echo "FAIL: GD_BIN=$GD_BIN: no such directory (build first)"
	exit 1
}
export GD_BIN
# Sanitizer reports from grantd and the clients go to their stderr; keep
# them there and make leaks fatal only at exit (the default).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

T_PASS=0
T_FAIL=0
T_DIR=$(mktemp -d "/tmp/grantd-it.$T_NAME.XXXXXX")
T_SITE=$T_DIR/paloalto
T_KEYS=$T_DIR/keys
mkdir -p "$T_KEYS"

# Address and ports from the test name: 127.A.B.1, A in 100..199, B in
# 1..250, and ports 20000-29999 (sshd), +1 and +2 for the node's endpoints.
T_HASH=$(printf '%s' "$T_NAME" | cksum | cut -d' ' -f1)
T_ADDR=127.$((100 + T_HASH % 100)).$(((T_HASH / 100) % 250 + 1)).1
T_SSH_PORT=$((20000 + (T_HASH / 25000) % 3333 * 3))
# Another run of the same test (a second checkout, a developer's ctest) may
# hold them: move to the next free address.  The replication tests put
# their three sites on 127.A.B.1, .2 and .3 (t_cluster_up), so those are
# checked too.
t_ports_free() {
	local a p
	for a in "${T_ADDR%.1}".{1,2,3}; do
		for p in "$T_SSH_PORT" $((T_SSH_PORT + 1)) $((T_SSH_PORT + 2)); do
			gd_port_free "$a" "$p" || return 1
		done
	done
}
# Two runs of the same test started together would both find the address
# free: each run holds a lock on its address for as long as it lives.
t_addr_lock() {
	exec {T_LOCK_FD}>"/tmp/grantd-it.addr.$T_ADDR.lock" || return 1
	flock -n "$T_LOCK_FD" && return 0
	exec {T_LOCK_FD}>&-
	return 1
}
for ((i = 0; i < 50; i++)); do
	t_addr_lock && { t_ports_free && break; exec {T_LOCK_FD}>&-; }
	T_ADDR=127.$((100 + (T_HASH + i + 1) % 100)).$(((T_HASH / 100) % 250 + 1)).1
done
T_PUB_PORT=$((T_SSH_PORT + 1))
T_SYNC_PORT=$((T_SSH_PORT + 2))
# Site directories whose grantd and sshd the cleanup stops (t_site_up and
# t_cluster_up add to it).
T_SITE_DIRS=()

T_CTL_MASTERS=()
# strace processes of t_strace_attach, stopped (detached) by the cleanup.
T_STRACE_PIDS=()

t_cleanup() {
	local m
	for m in "${T_STRACE_PIDS[@]}"; do
		kill -INT "$m" 2>/dev/null
	done
	for m in "${T_CTL_MASTERS[@]}"; do
		ssh -S "$m" -O exit x >/dev/null 2>&1
	done
	local d
	for d in "$T_SITE" "${T_SITE_DIRS[@]}"; do
		gd_sshd_stop "$d" >/dev/null 2>&1
		gd_grantd_stop "$d" >/dev/null 2>&1
	done
	if [[ ${GD_KEEP:-0} == 1 ]]; then
		echo "# kept $T_DIR"
	else
		rm -rf "$T_DIR"
	fi
}
trap t_cleanup EXIT
trap 'echo "FAIL: interrupted"; exit 1' INT TERM

t_section() { printf '# %s\n' "$*"; }
t_ok() { T_PASS=$((T_PASS + 1)); printf 'ok   %s\n' "$1"; }
t_fail() {
	T_FAIL=$((T_FAIL + 1))
	printf 'FAIL %s\n' "$1"
	shift
	local line
	for line in "$@"; do
		printf '%s\n' "$line" | head -c 2000 | sed 's/^/       | /'
	done
}

# t_run CMD...: run CMD, keeping its exit code in RC, its stdout in OUT and
# its stderr in ERR.
t_run() {
	local o=$T_DIR/.out e=$T_DIR/.err
	"$@" >"$o" 2>"$e"
	RC=$?
	OUT=$(<"$o")
	ERR=$(<"$e")
	return 0
}

t_show() { echo "exit $RC" "stdout: $OUT" "stderr: $ERR"; }

# t_expect CODE DESC CMD...: CMD exits with CODE ("nz" = any non-zero,
# "any" = whatever).
# Any sanitizer report on its stderr is a failure too.
t_expect() {
	local want=$1 desc=$2; shift 2
	t_run "$@"
	if [[ $ERR =~ $T_SAN_RE ]]; then
		t_fail "$desc (sanitizer report)" "$ERR"
		return 1
	fi
	if [[ $want == any ]] || [[ $want == nz && $RC != 0 ]] || [[ $want == "$RC" ]]; then
		t_ok "$desc"
		return 0
	fi
	t_fail "$desc: want exit $want, got $RC" "stdout: $OUT" "stderr: $ERR"
	return 1
}

# t_check DESC CMD...: CMD (a test, not a program under test) succeeds.
t_check() {
	local desc=$1; shift
	if "$@"; then t_ok "$desc"; return 0; fi
	t_fail "$desc"
	return 1
}

# t_has DESC TEXT NEEDLE: TEXT contains NEEDLE.
t_has() {
	if [[ $2 == *"$3"* ]]; then t_ok "$1"; return 0; fi
	t_fail "$1: '$3' not found in" "$2"
	return 1
}

# t_hasnt DESC TEXT NEEDLE
t_hasnt() {
	if [[ $2 != *"$3"* ]]; then t_ok "$1"; return 0; fi
	t_fail "$1: '$3' found in" "$2"
	return 1
}

# t_eq DESC GOT WANT
t_eq() {
	if [[ $2 == "$3" ]]; then t_ok "$1"; return 0; fi
	t_fail "$1: got '$2', want '$3'"
	return 1
}

# t_one_line DESC TEXT: TEXT is exactly one non-empty line (SPEC 2.8: a
# one-line error that says what was wrong).
t_one_line() {
	local n
	n=$(printf '%s' "$2" | grep -c .)
	if [[ -n $2 && $n == 1 ]]; then t_ok "$1"; return 0; fi
	t_fail "$1: want one line, got $n" "$2"
	return 1
}

# t_fatal MSG: a step the rest of the test depends on failed.
t_fatal() {
	t_fail "$1"
	t_logs
	t_done
}

# t_site_dirs: the site directories of this test (T_SITE first), once each.
t_site_dirs() {
	local d
	local -A seen=()
	for d in "$T_SITE" "${T_SITE_DIRS[@]}"; do
		[[ -n ${seen[$d]-} || ! -d $d ]] && continue
		seen[$d]=1
		echo "$d"
	done
}

t_logs() {
	local f d dirs
	mapfile -t dirs < <(t_site_dirs)
	for d in "${dirs[@]}"; do
		for f in "$d/grantd.log" "$d/sshd.log"; do
			[[ -s $f ]] || continue
			echo "# ---- end of $f"
			tail -n "${T_LOG_LINES:-30}" "$f" | sed 's/^/# /'
		done
	done
}

# T_SAN_RE: the lines that start a sanitizer report: ASan, UBSan and LSan
# ("ERROR: AddressSanitizer", "runtime error:"), and ThreadSanitizer
# ("WARNING: ThreadSanitizer: data race", "FATAL: ThreadSanitizer", and its
# "ThreadSanitizer: reported N warnings" at exit).
T_SAN_RE='Sanitizer|runtime error:'

# t_done_verify DIR PID NAME: a running node (not frozen) passes `grantctl
# verify` before it stops: in every test, its live digest is the one its
# records hash to.  A node that does not answer is t_done's business.
t_done_verify() {
	local d=$1 pid=$2 name=$3 stat out rc
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	[[ ${stat%% *} == T ]] && return 0
	out=$(gd_grantctl "$d" verify 2>&1)
	rc=$?
	if [[ $rc == 1 ]]; then
		t_fail "grantd${name:+ ($name)}: grantctl verify at the end" "$out"
	elif [[ $rc == 0 ]]; then
		t_ok "grantd${name:+ ($name)}: grantctl verify at the end"
	fi
}

# t_stacks PID: every thread's stack of a stuck process (gdb, when the
# machine has it), for the report of a node that would not stop.
# The whole of gdb's answer is kept in $T_DIR/stacks.PID.
t_stacks() {
	local full=$T_DIR/stacks.$1
	command -v gdb >/dev/null || { echo "(no gdb: no stacks)"; return 0; }
	timeout 60 gdb -batch -nx -p "$1" -ex 'thread apply all bt' >"$full" 2>&1
	echo "(all of it in $full)"
	t_tasks "$1" >>"$full"
	# another tracer holds it (LeakSanitizer's, which stops every thread
	# at exit to look for leaks): its stack and the threads' states then
	local tracer
	tracer=$(awk '/^TracerPid:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
	if [[ -n $tracer && $tracer != 0 ]]; then
		echo "traced by pid $tracer ($(cat "/proc/$tracer/comm" 2>/dev/null)):"
		timeout 60 gdb -batch -nx -p "$tracer" -ex 'thread apply all bt' >"$full.tracer" 2>&1
		grep -E '^#' "$full.tracer"
		t_tasks "$1"
	fi
	# one line a thread: its frames' function names, innermost first
	sed -nE 's/^Thread ([0-9]+).*/T\1:/p; s/^#[0-9]+ +(0x[0-9a-f]+ in )?([A-Za-z_][A-Za-z0-9_:]*).*/\2/p' "$full" |
		tr '\n' ' ' | sed 's/ T/\nT/g'
	echo
}
# t_tasks PID: each thread's name, state and kernel wait channel (its
# kernel stack when readable).
t_tasks() {
	local t
	for t in /proc/"$1"/task/*; do
		echo "task ${t##*/} $(cat "$t/comm" 2>/dev/null) state=$(awk '{ print $3 }' "$t/stat" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)"
		sed 's/^/    /' "$t/stack" 2>/dev/null
	done
}
# deploy/lib.sh's gd_stop_pid calls this before it SIGKILLs a process
# that would not stop (t_stop, t_cleanup): its stacks in the test output.
gd_stuck_report() {
	echo "# pid $1 would not stop; its threads' stacks:"
	t_stacks "$1" | sed 's/^/#   /'
}

# t_done: stop the nodes and sshds, check every node stopped cleanly and
# left no sanitizer report, print the summary and exit.
t_done() {
	trap - INT TERM
	local d name pid st dirs log
	mapfile -t dirs < <(t_site_dirs)
	for d in "${dirs[@]}"; do
		name=${d##*/}
		[[ $d == "$T_SITE" && ${#T_SITE_DIRS[@]} == 0 ]] && name=
		gd_sshd_stop "$d" >/dev/null 2>&1
		if [[ -f $d/grantd.pid ]]; then
			pid=$(<"$d/grantd.pid")
			if gd_alive "$pid" "$d/grantd.conf"; then
				t_done_verify "$d" "$pid" "$name"
				# resumed first: never a SIGCONT after the
				# SIGTERM (gd_stop_pid says why)
				kill -CONT "$pid" 2>/dev/null
				kill -TERM "$pid"
				if gd_wait_for "$GD_TIMEOUT" eval "! gd_alive $pid"; then
					st=$(gd_grantd_exit_status "$d")
					t_eq "grantd${name:+ ($name)} exits with status 0 on SIGTERM" "$st" 0
				else
					t_fail "grantd${name:+ ($name)} still runs ${GD_TIMEOUT}s after SIGTERM" \
						"$(t_stacks "$pid")"
					kill -KILL "$pid" 2>/dev/null
				fi
			else
				# started and never stopped by the test: it died
				t_fail "grantd${name:+ ($name)} died by itself (exit status $(gd_grantd_exit_status "$d"))" \
					"$(tail -n 20 "$d/grantd.log" 2>/dev/null)"
			fi
			rm -f "$d/grantd.pid"
		fi
		# (a quote inside ${name:+...} is a bash syntax error at run
		# time, which ended this function early and let the test pass)
		log=grantd.log
		[[ -n $name ]] && log="$name's grantd.log"

		if [[ -f $d/grantd.log ]] &&
			grep -qF 'state digest did not match the records' "$d/grantd.log"; then
			# a node found at start that its stored digest had
			# parted from its records (ops.c digest_open)
			t_fail "${name:+$name: }a restart found the stored digest apart from the records" \
				"$(grep -F 'state digest did not match' "$d/grantd.log")"
		fi
		if [[ -f $d/grantd.log ]]; then
			if grep -qE "$T_SAN_RE" "$d/grantd.log"; then
				t_fail "sanitizer report in $log" \
					"$(grep -A 40 -E "$T_SAN_RE" "$d/grantd.log" | head -80)"
			else
				t_ok "no sanitizer report in $log"
			fi
		fi
	done
	((T_FAIL > 0)) && t_logs
	echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
	((T_FAIL == 0))
	exit $?
}

# ---- the site ----------------------------------------------------------------

# t_config [KEY=VALUE...]: write the site's config (policy overrides).
t_config() {
	gd_site_config "$T_SITE" paloalto "tcp://$T_ADDR:$T_PUB_PORT" \
		"tcp://$T_ADDR:$T_SYNC_PORT" "$@" || t_fatal "write the site config"
}

# t_site_up [KEY=VALUE...]: config, grantd and sshd for the test's site.
t_site_up() {
	t_section "site paloalto: grantd + sshd on $T_ADDR:$T_SSH_PORT ($T_DIR)"
	t_config "$@"
	gd_grantd_start "$T_SITE" || t_fatal "grantd starts and answers grantctl status"
	t_sshd_up
}

t_sshd_up() {
	gd_sshd_start "$T_SITE" "$T_ADDR" "$T_SSH_PORT" || t_fatal "sshd starts on $T_ADDR:$T_SSH_PORT"
}

# t_ctl ARGS...: grantctl against the test's site.
t_ctl() { gd_grantctl "$T_SITE" "$@"; }

# t_digest: the state digest.
t_digest() { gd_digest "$T_SITE"; }

# t_user NAME: make an ssh key for NAME and add the user with it.
t_user() {
	gd_user_key "$T_KEYS/$1" || t_fatal "ssh-keygen for $1"
	t_ctl user add "$1" --key "$T_KEYS/$1.pub" >/dev/null ||
		t_fatal "grantctl user add $1 --key $T_KEYS/$1.pub"
}

# t_ssh SRCIP USER COMMAND...: run COMMAND through sshd and grant-shell as
# USER from SRCIP.
t_ssh() {
	local src=$1 user=$2; shift 2
	gd_ssh "$src" "$T_SSH_PORT" "$T_KEYS/$user" "$T_ADDR" "$@"
}

# t_url REPO: the ssh:// URL of REPO at the site.
t_url() { echo "ssh://root@$T_ADDR:$T_SSH_PORT/$1"; }

# t_git SRCIP USER GIT-ARGS...
t_git() {
	local src=$1 user=$2; shift 2
	gd_git "$src" "$T_KEYS/$user" "$@"
}

# t_clone SRCIP USER REPO DIR
t_clone() { t_git "$1" "$2" clone -q "$(t_url "$3")" "$4"; }

# t_commit DIR: add a commit with unique content to the work tree DIR.
t_commit() {
	local n=$(( $(git -C "$1" rev-list --count HEAD 2>/dev/null || echo 0) + 1 ))
	echo "change $n $RANDOM" >>"$1/file.txt"
	gd_git 127.0.0.1 /dev/null -C "$1" add file.txt &&
		gd_git 127.0.0.1 /dev/null -C "$1" commit -q -m "change $n" >/dev/null
}

# t_push SRCIP USER DIR: push DIR's HEAD to main.
t_push() { t_git "$1" "$2" -C "$3" push -q origin HEAD:refs/heads/main; }

# t_head DIR: the commit DIR's HEAD names.
t_head() { git -C "$1" rev-parse HEAD; }

# t_ref REPO [REF]: the value of REF (main) in the site's bare REPO.
t_ref() { git --git-dir="$T_SITE/repos/$1.git" rev-parse -q --verify "${2:-refs/heads/main}" 2>/dev/null; }

# t_hotp SECRET COUNTER [DIGITS]: the HOTP value.
t_hotp() { oathtool --hotp -b -d "${3:-6}" -c "$2" "$1"; }

# t_totp SECRET [EPOCH]: the TOTP value now, or at EPOCH.
t_totp() {
	if [[ -n ${2-} ]]; then oathtool --totp -b -N "@$2" "$1"
	else oathtool --totp -b "$1"; fi
}

# t_totp_settle: wait until at least 10 s are left in the current 30 s step,
# so a token made now is still current (and the previous one still inside
# a window of one step) when the node checks it.
t_totp_settle() {
	gd_wait_for 31 eval '(( $(date +%s) % 30 < 20 ))'
}

# t_bad_hotp SECRET FROM TO: a 6-digit value that is not the HOTP value of
# any counter FROM..TO (a wrong token of the right shape).
t_bad_hotp() {
	local secret=$1 from=$2 to=$3 v c
	local -A used=()
	for ((c = from; c <= to; c++)); do used[$(t_hotp "$secret" "$c")]=1; done
	for v in 123456 654321 111111 222222 909090 424242 777777; do
		[[ -z ${used[$v]-} ]] && { echo "$v"; return; }
	done
}

# t_json EXPR: evaluate the Python expression EXPR with `j` bound to the
# JSON document on stdin; prints the result (json.dumps for non-strings).
t_json() {
	python3 -c '
import json, sys
j = json.load(sys.stdin)
r = eval(sys.argv[1])
print(r if isinstance(r, str) else json.dumps(r))' "$1"
}

# t_ctl_master SRCIP USER PATH: start an ssh ControlMaster connection at
# PATH (for val-session); closed by the cleanup.
t_ctl_master() {
	local src=$1 user=$2 path=$3
	# shellcheck disable=SC2046
	ssh $(gd_ssh_opts "$src" "$T_KEYS/$user") -p "$T_SSH_PORT" \
		-o ControlMaster=yes -o ControlPath="$path" -o ControlPersist=120 \
		-fN "root@$T_ADDR" </dev/null || return 1
	T_CTL_MASTERS+=("$path")
}

# ---- three sites (replication) -------------------------------------------------
# The replication tests (test_repl_*.sh) run three real nodes, paloalto,
# portland and montreal, on 127.A.B.1, .2 and .3 (the test's own network,
# from its name; the same three ports on each address), each listing the
# other two as peers.  paloalto's directory is T_SITE, so the single-site
# helpers above (t_ctl, t_ssh, ...) talk to it.  Sites are named by name:
#   t_cluster_up [KEY=VALUE...]     configs (policy / node overrides) + nodes
#   t_c SITE ARGS...                grantctl at SITE
#   t_sh SITE SRCIP USER CMD...     grant-shell at SITE as if sshd ran it
#   t_start / t_stop / t_kill9 / t_pause / t_resume SITE
#   t_wait_converged SECS [SITE...] equal digests, nobody catching up

T_SITES=(paloalto portland montreal)
T_NET=${T_ADDR%.1}
declare -A T_SADDR=()
for ((i = 0; i < ${#T_SITES[@]}; i++)); do
	T_SADDR[${T_SITES[i]}]=$T_NET.$((i + 1))
done

# t_dir SITE: the site's directory.
t_dir() { echo "$T_DIR/$1"; }

# t_dirs [SITE...]: the directories of SITE... (default: all three).
t_dirs() {
	local s
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do echo "$T_DIR/$s"; done
}

# t_cluster_config [KEY=VALUE...]: write the three sites' configs; KEY=VALUE
# as for gd_site_config (policy keys, log_level, oplog_retention).  With
# T_METRICS_PORT set, each site serves [node] metrics on its own address
# and that port (t_metrics_addr).
t_cluster_config() {
	local s p d
	for s in "${T_SITES[@]}"; do
		gd_site_keygen "$T_DIR/$s" >/dev/null || t_fatal "grantctl keygen for $s"
	done
	for s in "${T_SITES[@]}"; do
		d=$T_DIR/$s
		gd_site_config "$d" "$s" "tcp://${T_SADDR[$s]}:$T_PUB_PORT" \
			"tcp://${T_SADDR[$s]}:$T_SYNC_PORT" "$@" || t_fatal "write $s's config"
		[[ -n ${T_METRICS_PORT:-} ]] &&
			sed -i "/^\[node\]\$/a metrics = $(t_metrics_addr "$s")" "$d/grantd.conf"
		for p in "${T_SITES[@]}"; do
			[[ $p == "$s" ]] && continue
			gd_site_add_peer "$d" "$p" "tcp://${T_SADDR[$p]}:$T_PUB_PORT" \
				"tcp://${T_SADDR[$p]}:$T_SYNC_PORT" "$(<"$T_DIR/$p/node.pub")"
		done
		T_SITE_DIRS+=("$d")
	done
}

# t_metrics_addr SITE: ADDR:PORT of SITE's metrics endpoint (T_METRICS_PORT).
t_metrics_addr() { echo "${T_SADDR[$1]}:$T_METRICS_PORT"; }

# t_http WHAT URL [METHOD]: an HTTP request (python3's urllib, 5 s); WHAT is
# body (print the body), code (print the status), type (print the
# Content-Type).  Exit 0 whenever the server answered, 1 when it did not.
t_http() {
	python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
what, url = sys.argv[1], sys.argv[2]
method = sys.argv[3] if len(sys.argv) > 3 else "GET"
req = urllib.request.Request(url, method=method,
                             data=b"" if method == "POST" else None)
try:
    r = urllib.request.urlopen(req, timeout=5)
except urllib.error.HTTPError as e:
    r = e
except Exception:
    sys.exit(1)
if what == "code":
    print(r.status if hasattr(r, "status") else r.code)
elif what == "type":
    print(r.headers.get("Content-Type", ""))
else:
    sys.stdout.write(r.read().decode("utf-8", "replace"))
PY
}

# t_cluster_up [KEY=VALUE...]: configs, then start the three nodes and wait
# until each hears both others and none is catching up.
t_cluster_up() {
	local s
	t_section "sites ${T_SITES[*]} on $T_NET.{1,2,3} ports $T_PUB_PORT/$T_SYNC_PORT ($T_DIR)"
	t_cluster_config "$@"
	for s in "${T_SITES[@]}"; do t_start "$s"; done
	for s in "${T_SITES[@]}"; do
		gd_wait_for 20 gd_peers_connected "$T_DIR/$s" ||
			t_fatal "$s hears both peers within 20 s"
	done
	t_wait_converged 20 || t_fatal "the three empty sites agree (digests) within 20 s"
}

# t_start SITE: start SITE's node (fatal if it does not come up).
t_start() { gd_grantd_start "$T_DIR/$1" || t_fatal "grantd at $1 starts"; }
# t_start_refused DIR DESC: a node at DIR that must refuse to start: it
# stops by itself with a non-zero status (checked, as DESC) and is cleared
# away so that it can be started again.
t_start_refused() {
	local st
	gd_grantd_start "$1" >/dev/null 2>&1
	st=$(gd_grantd_exit_status "$1")
	t_check "$2 (exit status $st)" eval '[[ $st =~ ^[0-9]+$ && $st != 0 ]]'
	# a node that started after all is stopped, not left running when
	# its pid file goes
	[[ $st =~ ^[0-9]+$ ]] || gd_grantd_stop "$1" >/dev/null 2>&1 || true
	rm -f "$1/grantd.pid"
}
# t_stop SITE: SIGTERM and wait; a check: the node must stop by itself
# and exit with status 0 (a node that needed SIGKILL, or died earlier,
# fails the test here, not only at t_done).  Returns 1 when it failed.
t_stop() {
	local d=$T_DIR/$1 st
	if [[ ! -f $d/grantd.pid ]]; then
		t_fail "grantd at $1 stops on SIGTERM: it was not running"
		return 1
	fi
	if ! gd_grantd_stop "$d"; then
		t_fail "grantd at $1 stops on SIGTERM: it needed SIGKILL"
		return 1
	fi
	st=$(gd_grantd_exit_status "$d")
	t_eq "grantd at $1 stops on SIGTERM with status 0" "$st" 0
}
# t_kill9 SITE: SIGKILL (a crash), wait until it is gone.
t_kill9() { gd_grantd_kill9 "$T_DIR/$1"; }
# t_wrap_grantd DIR BODY: a bin directory DIR for GD_BIN=DIR whose grantd
# is a bash script: REAL (the real grantd) set, then BODY, which execs it
# (as another account, with another HOME...); the other programs are the
# real ones, linked (grant-hook is found beside the real grantd through
# /proc/self/exe).
t_wrap_grantd() {
	local dir=$1 body=$2 p
	mkdir -p "$dir" || return 1
	for p in grantctl grant-shell grant-keys grant-hook; do
		ln -sf "$GD_BIN/$p" "$dir/$p" || return 1
	done
	printf '#!/bin/bash\nREAL=%q\n%s\n' "$GD_BIN/grantd" "$body" >"$dir/grantd" &&
		chmod 755 "$dir/grantd"
}
# t_pid SITE: the pid of SITE's node (before a t_kill9 removes the file).
t_pid() { cat "$T_DIR/$1/grantd.pid" 2>/dev/null; }
# t_gone PID: no process PID runs (whatever its pid file says).
t_gone() { [[ -n $1 ]] && ! gd_alive "$1"; }
# t_pause SITE / t_resume SITE: SIGSTOP / SIGCONT.
t_pause() { gd_grantd_pause "$T_DIR/$1"; }
t_resume() { gd_grantd_resume "$T_DIR/$1"; }
# t_running SITE
t_running() { gd_grantd_running "$T_DIR/$1"; }

# t_sshd SITE: an sshd for SITE on its address and the test's ssh port.
t_sshd() {
	gd_sshd_start "$T_DIR/$1" "${T_SADDR[$1]}" "$T_SSH_PORT" ||
		t_fatal "sshd for $1 starts on ${T_SADDR[$1]}:$T_SSH_PORT"
}

# t_c SITE ARGS...: grantctl against SITE.
t_c() { local s=$1; shift; gd_grantctl "$T_DIR/$s" "$@"; }

# t_sh SITE SRCIP USER COMMAND...: grant-shell at SITE for USER, as sshd
# would run it for a client at SRCIP (SSH_CONNECTION, SSH_ORIGINAL_COMMAND).
t_sh() {
	local s=$1 src=$2 user=$3; shift 3
	SSH_CONNECTION="$src 40022 ${T_SADDR[$s]} 22" SSH_ORIGINAL_COMMAND="$*" \
		"$GD_BIN/grant-shell" --config "$T_DIR/$s/grantd.conf" "$user" </dev/null
}

# t_sssh SITE SRCIP USER COMMAND...: COMMAND through SITE's real sshd.
t_sssh() {
	local s=$1 src=$2 user=$3; shift 3
	gd_ssh "$src" "$T_SSH_PORT" "$T_KEYS/$user" "${T_SADDR[$s]}" "$@"
}

# t_status SITE: `grantctl status --json` at SITE.
t_status() { t_c "$1" status --json; }

# t_sj SITE EXPR: EXPR (python, `j` = SITE's status) evaluated.
t_sj() { t_status "$1" | t_json "$2"; }

# t_sdigest SITE
t_sdigest() { gd_status_digest "$(t_status "$1")"; }

# t_syncing SITE: exit 0 when SITE answers and says it is catching up, 1
# when it answers and is not, 2 when it does not answer (so "validating
# again", t_expect_soon 1 ... t_syncing, needs a live node).
t_syncing() {
	local j
	j=$(t_status "$1" 2>/dev/null) || return 2
	gd_status_syncing "$j" || return 1
}

# T_PENDING[SITE]: the number of git refs a test knows stay pending at
# SITE (a repository gitolite never made there, refs whose objects nobody
# can serve); t_settled wants exactly that many, 0 where unset.
declare -A T_PENDING=()

# t_settled JSON SITE...: the `grantctl status --json` document JSON says
# its node is not catching up: not syncing, no git ref waiting for its
# objects (git.pending_refs 0, or T_PENDING[its site]), no peer ahead of
# it (every peers[].lag_ops 0), and every peer among SITE... heard
# (connected).
t_settled() {
	local j=$1 rest p site want=0; shift
	gd_status_syncing "$j" && return 1
	# the node's own site is the document's first "site" (peers come later)
	[[ $j =~ \"site\"[[:space:]]*:[[:space:]]*\"([a-z0-9-]+)\" ]] &&
		want=${T_PENDING[${BASH_REMATCH[1]}]:-0}
	[[ $j =~ \"pending_refs\"[[:space:]]*:[[:space:]]*([0-9]+) ]] &&
		((BASH_REMATCH[1] != want)) && return 1
	rest=$j
	while [[ $rest =~ \{\"site\":\"([a-z0-9-]+)\"[^{}]*\} ]]; do
		p=${BASH_REMATCH[0]} site=${BASH_REMATCH[1]}
		rest=${rest#*"$p"}
		[[ $p =~ \"lag_ops\":([0-9]+) ]] && ((BASH_REMATCH[1] != 0)) &&
			return 1
		[[ " $* " == *" $site "* && $p != *'"connected":true'* ]] &&
			return 1
	done
	return 0
}

# t_converged [SITE...]: SITE... (default all) are converged, as an
# operator means it (docs/replication.md section 3, "Converged"): the same
# state (equal digests and equal applied vectors), nobody catching up and
# nothing pending at any of them (t_settled).
t_converged() {
	local s j d a first='' firsta=''
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do
		j=$(t_status "$s" 2>/dev/null) || return 1
		t_settled "$j" "$@" || return 1
		d=$(gd_status_digest "$j") || return 1
		a=$(gd_status_applied "$j") || return 1
		[[ -z $first ]] && first=$d firsta=$a
		[[ $d == "$first" && $a == "$firsta" ]] || return 1
	done
	return 0
}

# t_wait_converged SECS [SITE...]
t_wait_converged() {
	local secs=$1; shift
	gd_wait_for "$secs" t_converged "$@"
}

# t_states [SITE...]: one line per site: digest, syncing, applied vector,
# peers (for failure reports).
t_states() {
	local s
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do
		printf '%s: ' "$s"
		t_status "$s" 2>&1 | python3 -c '
import json, sys
t = sys.stdin.read()
try:
    j = json.loads(t)
except Exception:
    print("no status: " + t.strip()[:200]); sys.exit()
print(j["digest"][:16], "syncing" if j.get("syncing") else "",
      "pending_refs", (j.get("git") or {}).get("pending_refs"),
      "applied", json.dumps(j.get("applied"), sort_keys=True), "counts",
      json.dumps(j.get("counts"), sort_keys=True), "peers",
      " ".join("%s:%s/lag%s" % (p["site"], "up" if p["connected"] else "DOWN",
               p.get("lag_ops")) for p in j.get("peers", [])))'
	done
}

# t_verify_out [SITE...]: `grantctl verify` at SITE... (default all), for
# failure reports: each site's verdict and per-family digests.
t_verify_out() {
	local s
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do
		echo "verify at $s:"
		t_c "$s" verify 2>&1 | sed 's/^/  /'
		echo "  (exit ${PIPESTATUS[0]})"
	done
}

# t_verified [SITE...]: `grantctl verify` exits 0 at every SITE (default
# all): each live digest is the one its records on disk hash to.
t_verified() {
	local s
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do
		t_c "$s" verify >/dev/null 2>&1 || return 1
	done
}

# t_expect_converged DESC SECS [SITE...]: a check that SITE... converge
# within SECS seconds; says how long it took, or shows every state.  Once
# they agree, `grantctl verify` must pass at each of them (SPEC 3.5: equal
# digests mean something only if each digest is its records' own).
t_expect_converged() {
	local desc=$1 secs=$2 t0; shift 2
	t0=$(gd_now_ms)
	if t_wait_converged "$secs" "$@"; then
		t_ok "$desc ($(( $(gd_now_ms) - t0 )) ms)"
		if t_verified "$@"; then
			t_ok "$desc: grantctl verify passes at ${*:-every site}"
			return 0
		fi
		t_fail "$desc: grantctl verify fails" "$(t_verify_out "$@")"
		return 1
	fi
	t_fail "$desc: not converged within ${secs}s" "$(t_states "$@")" \
		"$(t_verify_out "$@")"
	return 1
}

# t_exits CODE CMD...: CMD (output discarded) exits with CODE.
t_exits() {
	local code=$1; shift
	"$@" >/dev/null 2>&1
	[[ $? == "$code" ]]
}

# t_wait_code SECS CODE CMD...: poll CMD until it exits with CODE.
t_wait_code() {
	local secs=$1; shift
	gd_wait_for "$secs" t_exits "$@"
}

# t_expect_soon CODE SECS DESC CMD...: CMD exits with CODE within SECS
# (polled: a replicated change takes milliseconds to arrive).
t_expect_soon() {
	local code=$1 secs=$2 desc=$3 t0; shift 3
	t0=$(gd_now_ms)
	if t_wait_code "$secs" "$code" "$@"; then
		t_ok "$desc ($(( $(gd_now_ms) - t0 )) ms)"
		return 0
	fi
	t_run "$@"
	t_fail "$desc: want exit $code within ${secs}s, got $RC" "stdout: $OUT" "stderr: $ERR"
	return 1
}

# t_suser SITE NAME: make an ssh key for NAME and add the user at SITE.
t_suser() {
	gd_user_key "$T_KEYS/$2" || t_fatal "ssh-keygen for $2"
	t_c "$1" user add "$2" --key "$T_KEYS/$2.pub" >/dev/null ||
		t_fatal "grantctl user add $2 at $1"
}

# t_has_user SITE NAME: NAME is in SITE's user list.
t_has_user() {
	t_c "$1" user list --json 2>/dev/null | grep -q "\"name\":[[:space:]]*\"$2\""
}

# t_grep_log SITE TEXT: SITE's grantd.log contains TEXT.
t_grep_log() { grep -qF -- "$2" "$T_DIR/$1/grantd.log"; }

# t_py: a python3 that has the zmq module (Debian's python3-zmq), or
# nothing.  (A python3 from pyenv or a venv earlier in PATH lacks it.)
t_py() {
	local p
	for p in /usr/bin/python3 python3; do
		if "$p" -c 'import zmq' 2>/dev/null; then echo "$p"; return 0; fi
	done
	return 1
}

# ---- system call order (test_durability.sh) ----------------------------------
# kill -9 keeps the page cache, so only the order of the system calls shows
# whether an answer can leave before the fsync that covers it.  The calls
# tests/integration/fsync_order.py judges, traced with every descriptor's
# file or socket named (-yy) and buffers in hex (-xx):
T_STRACE_CALLS=write,pwrite64,writev,pwritev,fsync,fdatasync,sendto,sendmsg,recvfrom,recvmsg,openat,rename,exit_group
t_strace() { strace -f -qq -yy -s 256 -xx -e trace=$T_STRACE_CALLS "$@"; }

# t_traced PID: every thread of PID is held by a tracer.
t_traced() {
	local st t
	for t in /proc/"$1"/task/*; do
		st=$(grep '^TracerPid:' "$t/status" 2>/dev/null) || return 1
		[[ ${st##*[[:space:]]} != 0 ]] || return 1
	done
}

# t_strace_attach DIR LOG: trace the running node of the site in DIR, all
# its threads, into LOG until t_strace_detach; waits until every thread is
# held, so nothing done afterwards escapes the log.
t_strace_attach() {
	local pid
	pid=$(<"$1/grantd.pid") || return 1
	# exec: $! must be strace itself, which detaches on SIGINT
	(exec strace -f -qq -yy -s 256 -xx -e trace=$T_STRACE_CALLS -o "$2" \
		-p "$pid" 2>"$2.err") &
	T_STRACE_PIDS+=($!)
	gd_wait_for 20 t_traced "$pid" || { cat "$2.err" >&2; return 1; }
}

# t_strace_detach: stop every strace of t_strace_attach (the node runs on
# untraced: LeakSanitizer cannot work in a traced process at its exit).
t_strace_detach() {
	local p
	for p in "${T_STRACE_PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null
		gd_wait_for 10 eval "! gd_alive $p" || kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	T_STRACE_PIDS=()
}

# t_fsync_order MODE LOG [ARGS...]: tests/integration/fsync_order.py.
t_fsync_order() { python3 "$T_HERE/fsync_order.py" "$@"; }

# ---- secrets at rest -------------------------------------------------------

# t_no_secret DIR b32|hex|code VALUE: no file under DIR holds the secret
# VALUE in any encoding a leak could take.  A key given in base32 (b32)
# or hex (hex) is looked for as its raw bytes, its base32 text and its hex
# text, each in upper and lower case; a scratch code (code) as its digits.
# Prints where it was found.
t_no_secret() {
	python3 - "$@" <<'PY'
import base64, os, sys
d, kind, v = sys.argv[1:4]
if kind == "code":
    needles = {"the code": v.encode()}
else:
    key = (base64.b32decode(v.upper() + "=" * (-len(v) % 8)) if kind == "b32"
           else bytes.fromhex(v))
    b32 = base64.b32encode(key).decode().rstrip("=")
    needles = {"raw bytes": key, "base32": b32.encode(),
               "base32 (lower case)": b32.lower().encode(),
               "hex": key.hex().encode(), "hex (upper case)": key.hex().upper().encode()}
for root, _, files in os.walk(d):
    for f in files:
        p = os.path.join(root, f)
        try:
            with open(p, "rb") as fp:
                data = fp.read()
        except OSError:
            continue
        for what, n in needles.items():
            if n in data:
                print("%s of the secret found in %s" % (what, p))
                sys.exit(1)
PY
}
