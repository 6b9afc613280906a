#!/bin/bash
# The wall clock stepped under a running node (issue 19 item 9): NTP's first
# correction after boot, or an operator's `date -s`, moves stamps, grant
# expiries and lockouts, and must move no interval or deadline.  The one
# that matters most is the syncing gate (docs/architecture.md): a site that
# is catching up refuses tokens until it has caught up (or SYNC_MAX_MS of
# its own running time passed), so that a store behind its peers cannot
# accept a token already used elsewhere.  Before the node measured it on
# the monotonic clock, a step of an hour forward (up > SYNC_MAX_MS) or back
# (now - start wraps) opened the gate at once, and montreal took a token
# paloalto had already taken.
#
# montreal is kept behind its peers with GRANTD_TEST_FAULT_AT=commit (every
# batch it writes fails, so the operations it fetches never land) and its
# wall clock is stepped with GRANTD_TEST_CLOCK_STEP_MS and SIGUSR2
# (node/daemon/crashpoint.h).
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect_converged "the three sites agree" 10

t_section "paloalto takes <hotp 0..3> while montreal is down"
t_stop montreal
for c in 0 1 2 3; do
	t_expect 0 "paloalto: kim 2fa val <hotp $c>" t_sh paloalto 127.0.7.7 kim 2fa val "$(t_hotp "$KS" "$c")"
done
t_expect_converged "paloalto and portland agree" 10 paloalto portland

LOG=$(t_dir montreal)/grantd.log

# since OFFSET: montreal's log after byte OFFSET.
since() { tail -c +"$(($1 + 1))" "$LOG"; }
# has_since OFFSET TEXT (grep reads it all: with -q, tail could die of
# SIGPIPE and pipefail make a match a failure)
has_since() { since "$1" | grep -F -- "$2" >/dev/null; }
# sj_true SITE EXPR: EXPR over SITE's status is true.
sj_true() { [[ $(t_sj "$1" "$2" 2>/dev/null) == true ]]; }
# montreal_behind: montreal answers, says it is syncing, hears both peers
# and lags one of them.
montreal_behind() {
	sj_true montreal 'bool(j["syncing"] and all(p["connected"] for p in j["peers"]) and any(p["lag_ops"] > 0 for p in j["peers"]))'
}

# step_once DESC STEP_MS HOTP: montreal started behind with its clock hook
# armed to STEP_MS, stepped once; the gate must stay shut (HOTP, used at
# paloalto, refused as "catching up"), and the heartbeats keep flowing.
step_once() {
	local desc=$1 step=$2 c=$3 off pid
	t_section "montreal, behind, has its wall clock stepped $desc"
	off=$(stat -c %s "$LOG")
	GRANTD_TEST_FAULT_AT=commit GRANTD_TEST_CLOCK_STEP_MS=$step \
		gd_grantd_start "$(t_dir montreal)" || t_fatal "montreal starts with the hooks armed"
	t_expect_soon 0 10 "montreal hears both peers, lags them and is syncing" montreal_behind
	t_check "montreal's clock hook is armed step_ms=$step" has_since "$off" "test hook armed: SIGUSR2 steps the wall clock step_ms=$step"
	pid=$(t_pid montreal)
	off=$(stat -c %s "$LOG")
	t_check "SIGUSR2 to montreal" kill -USR2 "$pid"
	t_check "montreal took the step" gd_wait_for 5 has_since "$off" "test hook: wall clock stepped step_ms=$step"
	# The gate would open at the next turn of the loop (50 ms at most):
	# two seconds of it staying shut are forty turns.
	if gd_wait_for 2 has_since "$off" "sync done"; then
		t_fail "the syncing gate stays shut after the step" "$(since "$off" | grep -F "sync done")"
	else
		t_ok "the syncing gate stays shut after the step (2 s)"
	fi
	t_expect 0 "montreal still says it is syncing" t_syncing montreal
	t_run t_sh montreal 127.0.7.9 kim 2fa val "$(t_hotp "$KS" "$c")"
	t_eq "montreal: <hotp $c> (used at paloalto) refused after the step" "$RC" 1
	t_has "... as catching up, not as used" "$ERR" "catching up"
	# heartbeats keep their period: both sides still hear each other
	t_expect_soon 0 5 "montreal still hears both peers" \
		sj_true montreal 'all(p["connected"] for p in j["peers"])'
	t_expect_soon 0 5 "paloalto still hears montreal" \
		sj_true paloalto '[p for p in j["peers"] if p["site"] == "montreal"][0]["connected"]'
	t_stop montreal
}

step_once "an hour forward" 3600000 1
step_once "an hour back" -3600000 2

t_section "montreal without the hooks catches up"
t_start montreal
t_expect_converged "the three sites agree" 20
t_run t_sh montreal 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 3)"
t_eq "montreal: <hotp 3> (used at paloalto) refused" "$RC" 1
t_hasnt "... as used, not as catching up" "$ERR" "catching up"
t_done
