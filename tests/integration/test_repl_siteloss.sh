#!/bin/bash
# Site loss (SPEC 2.2, 2.3; issue 3).  One node is killed with SIGKILL and
# another frozen with SIGSTOP while the third keeps validating; once they
# are back all three converge.  Then the origin of a set of operations is
# killed before the dead node returns: that node catches up from the one
# remaining peer alone, including the dead origin's operations and token
# marks (a token used at the dead origin is refused at the returned node).
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=50
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add lost --mode required --writer kim" t_c paloalto repo add lost --mode required --writer kim
t_expect_converged "the three sites agree" 10

t_section "portland killed (-9), montreal frozen (SIGSTOP): paloalto keeps validating"
pid=$(t_pid portland)
t_kill9 portland
t_check "portland's node (pid $pid) is gone" t_gone "$pid"
t_pause montreal || t_fatal "SIGSTOP montreal"
t_expect 0 "paloalto: kim 2fa val <hotp 0> from 127.0.7.7" t_sh paloalto 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "paloalto: check kim 127.0.7.7 lost allowed" t_c paloalto check kim 127.0.7.7 lost
t_expect 1 "paloalto: <hotp 0> again refused" t_sh paloalto 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 0)"
t_suser paloalto lena
t_expect 0 "paloalto: repo add lost2 --mode opt-in --writer kim --writer lena" \
	t_c paloalto repo add lost2 --mode opt-in --writer kim --writer lena
t_expect 0 "paloalto: kim 2fa val-for-days 3 <hotp 1> from 127.0.7.8" \
	t_sh paloalto 127.0.7.8 kim 2fa val-for-days 3 "$(t_hotp "$KS" 1)"
t_expect 0 "paloalto: status answers with two peers silent" t_c paloalto status
peers_down() { ! t_status paloalto | grep -q '"connected":[[:space:]]*true'; }
t_expect_soon 0 5 "paloalto's status soon shows both peers not connected" peers_down

t_section "montreal resumed (SIGCONT), portland restarted: all converge"
t_resume montreal || t_fail "SIGCONT montreal"
t_start portland
t_expect_converged "all three converge (equal digests)" 20
for s in portland montreal; do
	t_expect 0 "$s: check kim 127.0.7.7 lost allowed (granted at paloalto while $s was away)" \
		t_c "$s" check kim 127.0.7.7 lost
	t_expect 0 "$s: check kim 127.0.7.8 lost allowed" t_c "$s" check kim 127.0.7.8 lost
	t_expect 0 "$s: has user lena" t_has_user "$s" lena
	t_run t_sh "$s" 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 1)"
	t_eq "$s: <hotp 1> (used at paloalto) refused" "$RC" 1
	t_hasnt "$s: ... because it is used, not because $s is catching up" "$ERR" "catching up"
done

t_section "portland dies; paloalto (the origin) writes, then dies too"
t_kill9 portland
t_expect 0 "paloalto: kim 2fa val <hotp 2> from 127.0.7.10" t_sh paloalto 127.0.7.10 kim 2fa val "$(t_hotp "$KS" 2)"
t_suser paloalto mona
t_expect 0 "paloalto: repo mode lost2 required" t_c paloalto repo mode lost2 required
t_expect 0 "paloalto: grant revoke kim 127.0.7.7" t_c paloalto grant revoke kim 127.0.7.7
t_expect_converged "montreal has paloalto's operations" 10 paloalto montreal
D_PM=$(t_sdigest montreal)
pid=$(t_pid paloalto)
t_kill9 paloalto
t_check "paloalto's node (pid $pid) is gone" t_gone "$pid"

t_section "portland returns with montreal its only live peer"
t_start portland
t_expect_converged "portland catches up from montreal alone" 20 portland montreal
t_eq "portland's digest is the one paloalto and montreal agreed on" "$(t_sdigest portland)" "$D_PM"
t_expect 0 "portland: check kim 127.0.7.10 lost allowed (paloalto's grant)" t_c portland check kim 127.0.7.10 lost
t_expect 1 "portland: check kim 127.0.7.7 lost refused (paloalto's revoke)" t_c portland check kim 127.0.7.7 lost
t_expect 0 "portland: has user mona" t_has_user portland mona
t_expect 0 "portland: repo list --json" t_c portland repo list --json
t_has "portland: lost2 is now required (paloalto's repo mode)" "$(t_c portland repo list --json | t_json '[r["mode"] for r in j if r["name"]=="lost2"][0]')" required
t_run t_sh portland 127.0.7.11 kim 2fa val "$(t_hotp "$KS" 2)"
t_eq "portland: <hotp 2>, used at the dead origin, refused" "$RC" 1
t_hasnt "portland: ... because it is used, not because portland is catching up" "$ERR" "catching up"
t_expect 1 "portland: 127.0.7.11 got no grant" t_sh portland 127.0.7.11 kim 2fa isval
t_expect 0 "portland: <hotp 3> accepted" t_sh portland 127.0.7.11 kim 2fa val "$(t_hotp "$KS" 3)"
t_expect_converged "portland and montreal agree" 10 portland montreal

t_section "paloalto returns"
t_start paloalto
t_expect_converged "all three converge" 20
t_expect 0 "paloalto: check kim 127.0.7.11 lost allowed (portland's grant)" t_c paloalto check kim 127.0.7.11 lost
t_expect 1 "paloalto: <hotp 3> (used at portland) refused" t_sh paloalto 127.0.7.12 kim 2fa val "$(t_hotp "$KS" 3)"
t_done
