#!/bin/bash
# Brute force does not scale with sites (SPEC 2.7; issue 3): failed token
# attempts are operations too, so with lockout_failures=3 one failure at
# each of the three sites locks the user everywhere; an unlock at any site
# lifts it everywhere.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=3 lockout_window=15m
t_suser paloalto lou
t_suser paloalto ben
LS=$(gd_base32_secret)
BS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll lou --hotp" t_c paloalto enroll lou --hotp --secret "$LS" --digits 6
t_expect 0 "paloalto: enroll ben --hotp" t_c paloalto enroll ben --hotp --secret "$BS" --digits 6
t_expect 0 "paloalto: repo add lk --mode required --writer lou --writer ben" \
	t_c paloalto repo add lk --mode required --writer lou --writer ben
t_expect_converged "the three sites agree" 10
LBAD=$(t_bad_hotp "$LS" 0 60)
BBAD=$(t_bad_hotp "$BS" 0 60)

t_section "two failures at two sites: below the limit everywhere"
t_expect 1 "paloalto: ben bad token refused" t_sh paloalto 127.0.7.7 ben 2fa val "$BBAD"
t_expect 1 "montreal: ben bad token refused" t_sh montreal 127.0.7.8 ben 2fa val "$BBAD"
t_expect_converged "the failures reach every site" 10
t_expect 0 "portland: ben's good token accepted (2 failures < 3)" t_sh portland 127.0.7.9 ben 2fa val "$(t_hotp "$BS" 0)"

t_section "one failure at each of the three sites locks lou everywhere"
t_expect 1 "paloalto: lou bad token from 127.0.7.7 refused" t_sh paloalto 127.0.7.7 lou 2fa val "$LBAD"
t_expect 1 "portland: lou bad token from 127.0.7.8 refused" t_sh portland 127.0.7.8 lou 2fa val "$LBAD"
t_expect 1 "montreal: lou bad token from 127.0.7.9 refused" t_sh montreal 127.0.7.9 lou 2fa val "$LBAD"
t_expect_converged "the failures reach every site" 10
for s in "${T_SITES[@]}"; do
	t_run t_sh "$s" 127.0.7.10 lou 2fa val "$(t_hotp "$LS" 0)"
	t_eq "$s: lou's good token refused (locked)" "$RC" 1
	t_has "$s: the refusal says the user is locked" "${ERR,,}" "lock"
	t_expect 1 "$s: lou has no grant for 127.0.7.10" t_sh "$s" 127.0.7.10 lou 2fa isval
done
t_expect 0 "montreal: ben (another user) is not locked" t_sh montreal 127.0.7.9 ben 2fa val "$(t_hotp "$BS" 1)"

t_section "an unlock at portland lifts it everywhere"
t_expect 0 "portland: grantctl unlock lou" t_c portland unlock lou
t_expect_converged "the unlock reaches every site" 10
t_expect 0 "montreal: lou's good token accepted" t_sh montreal 127.0.7.11 lou 2fa val "$(t_hotp "$LS" 0)"
t_expect_soon 0 5 "paloalto: check lou 127.0.7.11 lk allowed" t_c paloalto check lou 127.0.7.11 lk
t_expect 0 "paloalto: lou's next token accepted" t_sh paloalto 127.0.7.12 lou 2fa val "$(t_hotp "$LS" 1)"
t_expect_converged "all agree" 10
t_done
