# tests/integration/quorum_lib.sh: the fault harness of the token quorum
# (issue 12; SPEC 9): three real grantd nodes, faults made and undone on
# them, and one token offered at every site at once (tests/tools/offer.c).
# Sourced by test_quorum_faults.sh after lib.sh's helpers (it sources
# lib.sh itself).
#
# The three sites live on 127.0.24.1-3 (GRANTD_QUORUM_NET, default
# 127.0.24, the harness's own network; GRANTD_QUORUM_FIRST, default 1, the
# first of the three host numbers: two runs at once need apart addresses,
# as a cut drops everything between two addresses), on three ports of
# their own (a free triple, locked for the test's life).  Every connection a site makes
# to a peer leaves from the site's own address (ZeroMQ's
# "tcp://SRC:0;DST:PORT" endpoint form), so a site is cut off by address:
# iptables rules on loopback that drop every TCP packet between its address
# and each other site's (q_cut), in both directions, established connections
# included.  The rules are the test's own: each is removed by q_uncut, by
# q_heal and, whatever happens, by the EXIT trap.  Without root or iptables
# there is no partition fault (Q_CAN_CUT=0; the test says so).
#
# Faults (one site at a time, Q_STATE[SITE] says which):
#   q_cut SITE / q_uncut SITE     a network partition of SITE from both peers
#   q_kill SITE                   kill -9 (the node stays down)
#   q_freeze SITE / q_thaw SITE   SIGSTOP / SIGCONT (sockets open, no answer)
#   q_restart SITE                SIGTERM, then start again (it must come up)
#   q_revive SITE                 start a killed node again
#   q_heal                        every site back up and connected
# Offers:
#   q_offer TOKEN [SITE...]       offer TOKEN at SITE... (default: every site
#                                 that is not frozen) at once, as round
#                                 Q_ROUND; appends offer's lines to
#                                 Q_RESULTS and the round's faults to
#                                 Q_FAULTS (JSON lines; quorum_check.py
#                                 reads both); never prints the token
#   q_quorum_mode SITE            the "quorum": {"mode": ...} of SITE's
#                                 status, or "none" when it has none
# A frozen node is offered nothing: it would answer only after offer gave
# up, and an answer nobody saw cannot be counted (the checker says how many
# offers were skipped so).
# shellcheck shell=bash disable=SC2034 # T_* are lib.sh's, Q_RES and Q_TEXT the caller's
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

Q_NET=${GRANTD_QUORUM_NET:-127.0.24}
Q_FIRST=${GRANTD_QUORUM_FIRST:-1}
[[ $Q_FIRST =~ ^[0-9]+$ ]] && ((Q_FIRST >= 1 && Q_FIRST <= 250)) ||
	{ echo "FAIL: GRANTD_QUORUM_FIRST=$Q_FIRST: want 1-250"; exit 1; }
Q_ADDRS=("$Q_NET.$Q_FIRST" "$Q_NET.$((Q_FIRST + 1))" "$Q_NET.$((Q_FIRST + 2))")
# lib.sh took an address of its own (from the test's name): give it back
# and take a free triple of ports on the harness's network instead.
exec {T_LOCK_FD}>&-
q_ports_free() {
	local a p
	for a in "${Q_ADDRS[@]}"; do
		for p in "$1" $(($1 + 1)) $(($1 + 2)); do
			gd_port_free "$a" "$p" || return 1
		done
	done
}
Q_BASE=
for ((i = 0; i < 100; i++)); do
	p=$((24000 + (T_HASH + i) % 300 * 3))
	exec {T_LOCK_FD}>"/tmp/grantd-it.addr.${Q_ADDRS[0]}.$p.lock" || continue
	if flock -n "$T_LOCK_FD" && q_ports_free "$p"; then
		Q_BASE=$p
		break
	fi
	exec {T_LOCK_FD}>&-
done
[[ -n $Q_BASE ]] || { echo "FAIL: no free ports on ${Q_ADDRS[*]}"; exit 1; }
T_ADDR=${Q_ADDRS[0]}
T_NET=$Q_NET
T_SSH_PORT=$Q_BASE
T_PUB_PORT=$((Q_BASE + 1))
T_SYNC_PORT=$((Q_BASE + 2))
for ((i = 0; i < ${#T_SITES[@]}; i++)); do
	T_SADDR[${T_SITES[i]}]=${Q_ADDRS[i]}
done

Q_RESULTS=$T_DIR/offers.jsonl
Q_FAULTS=$T_DIR/faults.jsonl
Q_ROUND=0
Q_USER=${Q_USER:-qa}
Q_IP=${Q_IP:-$Q_NET.99}
Q_TIMEOUT_MS=${Q_TIMEOUT_MS:-5000}
declare -A Q_STATE=()
for s in "${T_SITES[@]}"; do Q_STATE[$s]=up; done

Q_CAN_CUT=1
command -v iptables >/dev/null && [[ $(id -u) == 0 ]] &&
	iptables -S INPUT >/dev/null 2>&1 || Q_CAN_CUT=0

# Every rule this test added, as the arguments that made it, by site.
declare -A Q_RULES=()
q_net_heal() {
	local s r
	for s in "${!Q_RULES[@]}"; do
		while IFS= read -r r; do
			[[ -n $r ]] || continue
			# shellcheck disable=SC2086
			iptables -D INPUT $r 2>/dev/null
		done <<<"${Q_RULES[$s]}"
		unset "Q_RULES[$s]"
	done
}
trap 'q_net_heal; t_cleanup' EXIT

# q_rules_left: the INPUT rules between the harness's sites that are still
# there (none once q_net_heal ran).
q_rules_left() {
	local a=${Q_ADDRS[*]}
	a=${a// /|}
	a=${a//./\\.}
	iptables -S INPUT 2>/dev/null | grep -E -- "-s ($a)/32 -d ($a)/32 .*-j DROP"
}

# q_cluster_up local|majority [KEY=VALUE...]: the three sites' configs
# (policy for many tokens in a row: a look-ahead of 100 counters, more than
# a site falls behind in the rounds a fault lasts, and a lock-out that the
# refused copies of a token never reach), each peer's
# endpoints bound to the site's own address, and the nodes, connected and
# agreeing.
q_cluster_up() {
	local mode=$1 s d; shift
	local pol=(hotp_lookahead=100 lockout_failures=64 lockout_window=1s)
	[[ $mode == majority ]] && pol+=(token_quorum=majority)
	t_section "sites ${T_SITES[*]} on ${Q_ADDRS[*]} ports $T_PUB_PORT/$T_SYNC_PORT, token_quorum=$mode ($T_DIR)"
	t_cluster_config "${pol[@]}" "$@"
	for s in "${T_SITES[@]}"; do
		d=$T_DIR/$s
		# tcp://PEER:PORT -> tcp://SELF:0;PEER:PORT in the [peer] sections
		sed -i -E "/^\[peer /,\$ s#^((publish|sync) = tcp://)#\1${T_SADDR[$s]}:0;#" \
			"$d/grantd.conf" || t_fatal "bind $s's peer endpoints to its address"
	done
	for s in "${T_SITES[@]}"; do t_start "$s"; done
	for s in "${T_SITES[@]}"; do
		gd_wait_for 30 gd_peers_connected "$T_DIR/$s" ||
			t_fatal "$s hears both peers within 30 s"
	done
	q_wait_agree 30 || t_fatal "the three sites agree (digests) within 30 s"
}

# q_stop_all / q_start_all: every node stopped (checked) / started.
q_stop_all() { local s; for s in "${T_SITES[@]}"; do t_stop "$s"; done; }
q_start_all() { local s; for s in "${T_SITES[@]}"; do t_start "$s"; done; }

# q_agree [SITE...]: SITE... (default all) answer, none is catching up, and
# all report the same state digest.  By digest only, not by applied
# vector: a store restored from an old backup can keep an applied vector
# apart from its peers' while the digests agree, so a wait on vectors would
# never end after a restore.
q_agree() {
	local s json d first=
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do
		json=$(t_status "$s" 2>/dev/null) || return 1
		gd_status_syncing "$json" && return 1
		d=$(gd_status_digest "$json") || return 1
		[[ -z $first ]] && first=$d
		[[ $d == "$first" ]] || return 1
	done
}
q_wait_agree() { local secs=$1; shift; gd_wait_for "$secs" q_agree "$@"; }

# q_quorum_mode SITE: the token quorum SITE's status reports ("majority",
# "local"), "none" when its status has no quorum object, "" when it does
# not answer.
q_quorum_mode() {
	t_status "$1" 2>/dev/null | python3 -c '
import json, sys
try:
    j = json.load(sys.stdin)
except Exception:
    sys.exit(1)
q = j.get("quorum")
print(q.get("mode", "none") if isinstance(q, dict) else "none")'
}

# ---- faults ----------------------------------------------------------------

# q_cut SITE: drop every TCP packet between SITE's address and each other
# site's, both ways.
q_cut() {
	local s=$1 p a=${T_SADDR[$1]} r rules=
	((Q_CAN_CUT)) || return 1
	for p in "${T_SITES[@]}"; do
		[[ $p == "$s" ]] && continue
		for r in "-i lo -p tcp -s $a -d ${T_SADDR[$p]} -j DROP" \
			"-i lo -p tcp -s ${T_SADDR[$p]} -d $a -j DROP"; do
			# shellcheck disable=SC2086
			iptables -I INPUT $r || { Q_RULES[$s]+=$rules; return 1; }
			rules+=$r$'\n'
		done
	done
	Q_RULES[$s]+=$rules
	Q_STATE[$s]="cut"
}

# q_uncut SITE: remove SITE's rules.
q_uncut() {
	local s=$1 r
	while IFS= read -r r; do
		[[ -n $r ]] || continue
		# shellcheck disable=SC2086
		iptables -D INPUT $r 2>/dev/null
	done <<<"${Q_RULES[$s]-}"
	unset "Q_RULES[$s]"
	Q_STATE[$s]=up
}

q_kill() { t_kill9 "$1" || t_fatal "kill -9 $1"; Q_STATE[$1]=killed; }
q_revive() { t_start "$1"; Q_STATE[$1]=up; }
q_freeze() { t_pause "$1" || t_fatal "SIGSTOP $1"; Q_STATE[$1]=stopped; }
q_thaw() { t_resume "$1" || t_fatal "SIGCONT $1"; Q_STATE[$1]=up; }
q_restart() {
	t_stop "$1" >/dev/null || t_fatal "$1 stops on SIGTERM for a restart"
	t_start "$1"
	Q_STATE[$1]=up
}

# q_undo SITE: SITE's fault undone.
q_undo() {
	case ${Q_STATE[$1]} in
	cut) q_uncut "$1" ;;
	killed) q_revive "$1" ;;
	stopped) q_thaw "$1" ;;
	esac
}

# q_heal: every fault undone.
q_heal() {
	local s
	for s in "${T_SITES[@]}"; do q_undo "$s"; done
}

# q_faulty: the sites with a fault, space-separated.
q_faulty() {
	local s out=()
	for s in "${T_SITES[@]}"; do
		[[ ${Q_STATE[$s]} != up ]] && out+=("$s")
	done
	echo "${out[*]}"
}

# ---- offers ------------------------------------------------------------------

# q_offer_args SITE...: offer's SITE=CONFIG arguments.
q_offer_args() {
	local s
	for s in "$@"; do printf '%s=%s\n' "$s" "$T_DIR/$s/grantd.conf"; done
}

# q_offer TOKEN FAULT [SITE...]: one round (see the top); FAULT describes
# it for the checker.  Its lines are also in OFFER (for checks on one
# round).  With Q_RECORD=0 nothing goes to Q_RESULTS and Q_FAULTS.
q_offer() {
	local tok=$1 fault=$2 s args=() sites=() states=
	shift 2
	(($#)) || set -- "${T_SITES[@]}"
	for s in "$@"; do
		[[ ${Q_STATE[$s]} == stopped ]] && continue
		sites+=("$s")
	done
	for s in "${T_SITES[@]}"; do
		states+="${states:+, }\"$s\": \"${Q_STATE[$s]}\""
	done
	mapfile -t args < <(q_offer_args "${sites[@]}")
	((${Q_RECORD:-1})) && printf '{"round": %d, "fault": "%s", "offered": %d, "states": {%s}}\n' \
		"$Q_ROUND" "$fault" "$#" "$states" >>"$Q_FAULTS"
	if ((${#sites[@]})); then
		OFFER=$(printf '%s\n' "$tok" | "$GD_BIN/offer" --round "$Q_ROUND" \
			--timeout "$Q_TIMEOUT_MS" --ip "$Q_IP" "$Q_USER" "${args[@]}") ||
			t_fatal "offer ran (round $Q_ROUND)"
		((${Q_RECORD:-1})) && printf '%s\n' "$OFFER" >>"$Q_RESULTS"
	else
		OFFER=
	fi
	Q_ROUND=$((Q_ROUND + 1))
}

# q_result SITE: what SITE answered in the last q_offer into Q_RES
# (accepted, refused, ..., none: not offered) and its refusal's first line
# into Q_TEXT.
q_result() {
	local line
	line=$(grep -F "\"site\": \"$1\"" <<<"$OFFER" | head -n 1)
	Q_RES=none Q_TEXT=
	[[ -n $line ]] || return 0
	Q_RES=$(t_json 'j["result"]' <<<"$line")
	Q_TEXT=$(t_json 'j["text"]' <<<"$line")
}

# q_check [ARGS...]: tests/integration/quorum_check.py on this test's
# results.
q_check() {
	python3 "$T_HERE/quorum_check.py" --faults "$Q_FAULTS" "$@" "$Q_RESULTS"
}
