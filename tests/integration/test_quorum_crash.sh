#!/bin/bash
# The strict token quorum at the moments that matter (node/daemon/crashpoint.h):
# kill -9 of a voter whose promise is durable but not yet answered, and of
# an origin that has a majority's promises but has not written the mark.
# Neither may let a token be accepted twice: a promise survives its site's
# crash, and a use a majority promised stays dead everywhere, accepted or
# not.  The node kills itself at the named point (GRANTD_TEST_CRASH_AT), so
# the moment is hit every run; it is then restarted without the hook.
. "$(dirname "$0")/lib.sh"

t_cluster_up token_quorum=majority token_quorum_timeout=1s lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect_converged "the three sites agree" 10
voter() { [[ $(t_sj "$1" 'j["quorum"]["voter"]') == true ]]; }
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 15 "$s: a voter" voter "$s"
done
c=0
# up SITE: SITE serves tokens again (peers heard, caught up, voting)
up() {
	gd_wait_for 20 gd_peers_connected "$(t_dir "$1")" &&
		t_wait_code 20 1 t_syncing "$1" && gd_wait_for 20 voter "$1"
}
# crash_start SITE POINT: restart SITE with the test hook armed at POINT
crash_start() {
	t_stop "$1"
	GRANTD_TEST_CRASH_AT=$2 t_start "$1"
	t_check "$1: up again, the hook armed at $2" up "$1"
}
died() { gd_wait_for 30 eval "! t_running $1"; }

t_section "kill -9 at vote-promised: a voter dies with its promise durable, unanswered"
crash_start portland vote-promised
t_expect 0 "paloalto: <hotp $c> accepted (montreal's vote is the second)" \
	t_sh paloalto 127.0.21.70 kim 2fa val "$(t_hotp "$KS" "$c")"
t_check "portland died at vote-promised" died portland
rm -f "$(t_dir portland)/grantd.pid"
t_start portland
t_check "portland: up again" up portland
t_expect 1 "portland: <hotp $c> refused after its restart" \
	t_sh portland 127.0.21.71 kim 2fa val "$(t_hotp "$KS" "$c")"

t_section "kill -9 at vote-decided: the origin dies with a majority's promises, no mark"
c=$((c + 1))
crash_start paloalto vote-decided
# the client waits for an answer that never comes: it is stopped once the
# node is seen dead (it would fail closed at its own timeout)
SSH_CONNECTION="127.0.21.72 40022 ${T_SADDR[paloalto]} 22" \
	SSH_ORIGINAL_COMMAND="2fa val $(t_hotp "$KS" "$c")" \
	"$GD_BIN/grant-shell" --config "$(t_dir paloalto)/grantd.conf" kim \
	</dev/null >"$T_DIR/decided.out" 2>&1 &
cpid=$!
t_check "paloalto died at vote-decided" died paloalto
kill "$cpid" 2>/dev/null
wait "$cpid"
rc=$?
t_check "paloalto: no acceptance reported (client exit $rc)" eval '((rc != 0))'
rm -f "$(t_dir paloalto)/grantd.pid"
t_start paloalto
t_check "paloalto: up again" up paloalto
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: <hotp $c> (promised by a majority, never accepted) refused" \
		t_sh "$s" 127.0.21.73 kim 2fa val "$(t_hotp "$KS" "$c")"
done
t_expect 1 "127.0.21.72 and .73 got no grant" t_sh montreal 127.0.21.72 kim 2fa isval
c=$((c + 1))
t_expect 0 "montreal: the next token <hotp $c> accepted" \
	t_sh montreal 127.0.21.74 kim 2fa val "$(t_hotp "$KS" "$c")"
t_expect_converged "the three sites agree at the end" 20
t_done
