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
# "N passed, N failed", stops the node (which must exit cleanly on
# SIGTERM), fails on any sanitizer report in the node's log, and exits
# non-zero if anything failed.  GD_KEEP=1 keeps the temporary directory.

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
# hold them: move to the next free address.
for ((i = 0; i < 50; i++)); do
	gd_port_free "$T_ADDR" "$T_SSH_PORT" &&
		gd_port_free "$T_ADDR" $((T_SSH_PORT + 1)) &&
		gd_port_free "$T_ADDR" $((T_SSH_PORT + 2)) && break
	T_ADDR=127.$((100 + (T_HASH + i + 1) % 100)).$(((T_HASH / 100) % 250 + 1)).1
done
T_PUB_PORT=$((T_SSH_PORT + 1))
T_SYNC_PORT=$((T_SSH_PORT + 2))

T_CTL_MASTERS=()

t_cleanup() {
	local m
	for m in "${T_CTL_MASTERS[@]}"; do
		ssh -S "$m" -O exit x >/dev/null 2>&1
	done
	gd_sshd_stop "$T_SITE" >/dev/null 2>&1
	gd_grantd_stop "$T_SITE" >/dev/null 2>&1
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
	if [[ $ERR == *"Sanitizer"* || $ERR == *"runtime error:"* ]]; then
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

t_logs() {
	local f
	for f in "$T_SITE/grantd.log" "$T_SITE/sshd.log"; do
		[[ -s $f ]] || continue
		echo "# ---- end of $f"
		tail -n 30 "$f" | sed 's/^/# /'
	done
}

# t_done: stop the node and sshd, check the node stopped cleanly and left no
# sanitizer report, print the summary and exit.
t_done() {
	trap - INT TERM
	if [[ -f $T_SITE/grantd.pid ]]; then
		local pid st
		pid=$(<"$T_SITE/grantd.pid")
		gd_sshd_stop "$T_SITE" >/dev/null 2>&1
		if gd_alive "$pid"; then
			kill -TERM "$pid"
			if gd_wait_for "$GD_TIMEOUT" eval "! gd_alive $pid"; then
				wait "$pid" 2>/dev/null
				st=$?
				t_eq "grantd exits with status 0 on SIGTERM" "$st" 0
			else
				t_fail "grantd still runs ${GD_TIMEOUT}s after SIGTERM"
				kill -KILL "$pid" 2>/dev/null
			fi
		fi
		rm -f "$T_SITE/grantd.pid"
	fi
	if [[ -f $T_SITE/grantd.log ]]; then
		if grep -qE 'Sanitizer|runtime error:' "$T_SITE/grantd.log"; then
			t_fail "sanitizer report in grantd.log" \
				"$(grep -A 30 -E 'Sanitizer|runtime error:' "$T_SITE/grantd.log" | head -60)"
		else
			t_ok "no sanitizer report in grantd.log"
		fi
	fi
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
