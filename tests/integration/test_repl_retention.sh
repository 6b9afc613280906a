#!/bin/bash
# Operation log retention and state transfer (SPEC 5; issue 3): with
# `oplog_retention = 2s`, a node that was down while operations happened
# and the peers' logs were truncated past them cannot be given the missing
# ranges; it gets a state transfer (snapshot + vector) instead, says so in
# its log, and converges.  Token marks come with the snapshot.
. "$(dirname "$0")/lib.sh"

# t_log_since SITE ISO TEXT: SITE's log has a line with TEXT stamped at or
# after ISO (log lines start with an ISO-8601 UTC time in ms).
t_log_since() {
	awk -v t="$2" -v x="$3" '$1 >= t && index($0, x) { f = 1 } END { exit !f }' \
		"$(t_dir "$1")/grantd.log"
}
iso_ms() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%3NZ; }

t_cluster_up lockout_failures=50 oplog_retention=2s
t_check "the config sets oplog_retention = 2s" grep -q '^oplog_retention = 2s' "$(t_dir paloalto)/grantd.conf"
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add ret --mode required --writer kim" t_c paloalto repo add ret --mode required --writer kim
t_expect 0 "paloalto: kim 2fa val <hotp 0> from 127.0.7.7" t_sh paloalto 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect_converged "the three sites agree" 10

t_section "montreal down while paloalto and portland write"
t_kill9 montreal
t_expect 0 "paloalto: kim 2fa val <hotp 1> from 127.0.7.8" t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "portland: kim 2fa val <hotp 2> from 127.0.7.9" t_sh portland 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 2)"
t_expect 0 "portland: grant revoke kim 127.0.7.7" t_c portland grant revoke kim 127.0.7.7
for i in $(seq 1 20); do
	t_c paloalto user add "r$i" >/dev/null || t_fail "paloalto: user add r$i"
	t_c portland repo add "ret$i" --mode opt-in >/dev/null || t_fail "portland: repo add ret$i"
done
t_ok "paloalto: 20 users added, portland: 20 repositories added"
t_expect_converged "paloalto and portland agree" 10 paloalto portland
# Every node truncates its log each second, dropping what is older than
# 2 s.  A last operation at each site after time M is dropped by a run at
# M + 2 s or later, which logs it; that run also dropped everything written
# before M, i.e. all montreal missed.
M=$(gd_now_ms)
t_expect 0 "paloalto: user add last1" t_c paloalto user add last1
t_expect 0 "portland: user add last2" t_c portland user add last2
t_expect_converged "paloalto and portland agree" 10 paloalto portland
D=$(t_sdigest paloalto)
cut=$(iso_ms "$((M / 1000 + 2)).$(printf %03d $((M % 1000)))")
for s in paloalto portland; do
	t_expect_soon 0 15 "$s: its operation log is truncated past montreal's gap" \
		t_log_since "$s" "$cut" "operation log truncated"
done

t_section "montreal returns behind the logs: state transfer"
t_start montreal
t_expect_converged "all three converge" 30
t_eq "montreal's digest is the others' one" "$(t_sdigest montreal)" "$D"
t_check "montreal's log says 'state transfer'" t_grep_log montreal "state transfer"
t_check "... and that it finished ('state transfer done')" t_grep_log montreal "state transfer done"
t_expect 0 "montreal: check kim 127.0.7.8 ret allowed (granted while it was down)" t_c montreal check kim 127.0.7.8 ret
t_expect 0 "montreal: check kim 127.0.7.9 ret allowed" t_c montreal check kim 127.0.7.9 ret
t_expect 1 "montreal: check kim 127.0.7.7 ret refused (revoked while it was down)" t_c montreal check kim 127.0.7.7 ret
t_expect 0 "montreal: has user r20" t_has_user montreal r20
t_expect 0 "montreal: repo list --json" t_c montreal repo list --json
t_has "montreal: has repository ret20" "$OUT" '"ret20"'
for c in 1 2; do
	t_run t_sh montreal 127.0.7.10 kim 2fa val "$(t_hotp "$KS" "$c")"
	t_eq "montreal: <hotp $c> (used while it was down) refused" "$RC" 1
	t_hasnt "... as used, not as catching up" "$ERR" "catching up"
done
t_expect 0 "montreal: <hotp 3> accepted" t_sh montreal 127.0.7.10 kim 2fa val "$(t_hotp "$KS" 3)"
t_expect_converged "all three agree after montreal's write" 10
t_expect 1 "paloalto: <hotp 3> (used at montreal) refused" t_sh paloalto 127.0.7.11 kim 2fa val "$(t_hotp "$KS" 3)"

t_section "live replication still works after the state transfer"
t_expect 0 "paloalto: user add after" t_c paloalto user add after
t_expect_soon 0 5 "montreal: has user after" t_has_user montreal after
t_expect_converged "all three agree" 10
t_done
