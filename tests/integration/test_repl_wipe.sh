#!/bin/bash
# A lost disk (SPEC 2.2, 3.5 rebuild; issue 3): a site whose data directory
# is deleted is restarted empty; it rebuilds from its peers and converges.
# While it is catching up it refuses token validation ("catching up"), so
# an empty store never accepts a token used before; afterwards the old
# tokens are still dead there.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=50
t_suser paloalto kim
t_suser portland tom
KS=$(gd_base32_secret)
TS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect_soon 0 10 "montreal: has user tom" t_has_user montreal tom
t_expect 0 "montreal: enroll tom --hotp" t_c montreal enroll tom --hotp --secret "$TS" --digits 8
t_expect 0 "portland: repo add w --mode required --writer kim --writer tom" \
	t_c portland repo add w --mode required --writer kim --writer tom
t_expect_converged "the three sites agree" 10
t_expect 0 "paloalto: kim 2fa val <hotp 0>" t_sh paloalto 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "portland: kim 2fa val <hotp 1>" t_sh portland 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_expect 0 "montreal: kim 2fa val <hotp 2>" t_sh montreal 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 2)"
t_expect 0 "montreal: tom 2fa val <hotp 0, 8 digits>" t_sh montreal 127.0.7.10 tom 2fa val "$(t_hotp "$TS" 0 8)"
t_expect 0 "montreal: grant revoke kim 127.0.7.8" t_c montreal grant revoke kim 127.0.7.8
t_expect_converged "the three sites agree" 10
D0=$(t_sdigest paloalto)

t_section "montreal loses its disk while paloalto is frozen"
# With paloalto frozen montreal cannot hear every peer, so it stays in its
# syncing state for the whole grace period: a window wide enough to see.
t_kill9 montreal
rm -rf "$(t_dir montreal)/data"
t_check "montreal's data directory is gone" test ! -e "$(t_dir montreal)/data"
t_pause paloalto || t_fatal "SIGSTOP paloalto"
t_start montreal
t_check "montreal says it is syncing" t_syncing montreal
t_run t_sh montreal 127.0.7.11 kim 2fa val "$(t_hotp "$KS" 0)"
t_eq "montreal: <hotp 0> (used at paloalto) refused while syncing" "$RC" 1
t_has "... with 'catching up'" "$ERR" "catching up"
t_run t_sh montreal 127.0.7.11 kim 2fa val "$(t_hotp "$KS" 3)"
t_eq "montreal: even a fresh <hotp 3> is refused while syncing" "$RC" 1
t_has "... with 'catching up'" "$ERR" "catching up"
t_run t_sh montreal 127.0.7.11 tom 2fa val "$(t_hotp "$TS" 0 8)"
t_eq "montreal: tom's used <hotp 0> refused while syncing" "$RC" 1
t_has "... with 'catching up'" "$ERR" "catching up"
t_resume paloalto || t_fail "SIGCONT paloalto"

t_section "montreal rebuilds from its peers"
t_expect_converged "all three converge" 20
t_eq "the digest is the one before the loss" "$(t_sdigest montreal)" "$D0"
t_expect 0 "montreal: check kim 127.0.7.7 w allowed (granted at paloalto)" t_c montreal check kim 127.0.7.7 w
t_expect 0 "montreal: check kim 127.0.7.9 w allowed (granted at montreal before the loss)" t_c montreal check kim 127.0.7.9 w
t_expect 1 "montreal: check kim 127.0.7.8 w refused (revoked at montreal before the loss)" t_c montreal check kim 127.0.7.8 w
for c in 0 1 2; do
	t_run t_sh montreal 127.0.7.12 kim 2fa val "$(t_hotp "$KS" "$c")"
	t_eq "montreal: old <hotp $c> still dead" "$RC" 1
	t_hasnt "... refused as used, not as catching up" "$ERR" "catching up"
done
t_run t_sh montreal 127.0.7.12 tom 2fa val "$(t_hotp "$TS" 0 8)"
t_eq "montreal: tom's old <hotp 0> (used at montreal before the loss) still dead" "$RC" 1
t_expect 1 "montreal: 127.0.7.12 got no grant" t_sh montreal 127.0.7.12 kim 2fa isval
t_expect 0 "montreal: kim <hotp 3> accepted" t_sh montreal 127.0.7.12 kim 2fa val "$(t_hotp "$KS" 3)"
t_expect_converged "and the new mark reaches everyone" 10
t_expect 1 "paloalto: <hotp 3> (used at rebuilt montreal) refused" t_sh paloalto 127.0.7.13 kim 2fa val "$(t_hotp "$KS" 3)"
t_expect 0 "portland: check kim 127.0.7.12 w allowed (granted at the rebuilt montreal)" t_c portland check kim 127.0.7.12 w

t_section "portland loses its disk with both peers up; grantctl rebuild"
t_kill9 portland
t_expect_soon 1 5 "montreal: grantctl rebuild --from portland (down) is refused" \
	t_c montreal rebuild --from portland
t_has "... saying it cannot reach it" "$(t_c montreal rebuild --from portland 2>&1)" "cannot reach"
rm -rf "$(t_dir portland)/data"
t_start portland
t_expect 0 "portland: grantctl rebuild --from montreal" t_c portland rebuild --from montreal
t_expect 2 "portland: grantctl rebuild --from nosuchsite exits 2" t_c portland rebuild --from nosuchsite
t_expect 2 "portland: grantctl rebuild --from portland (itself) exits 2" t_c portland rebuild --from portland
t_expect_converged "all three converge" 20
t_expect 0 "portland: check kim 127.0.7.12 w allowed" t_c portland check kim 127.0.7.12 w
t_run t_sh portland 127.0.7.14 kim 2fa val "$(t_hotp "$KS" 3)"
t_eq "portland: <hotp 3> still dead after its rebuild" "$RC" 1
t_hasnt "... refused as used, not as catching up" "$ERR" "catching up"
t_expect 0 "portland: tom <hotp 1> accepted" t_sh portland 127.0.7.14 tom 2fa val "$(t_hotp "$TS" 1 8)"
t_expect_converged "all three agree at the end" 10
t_done
