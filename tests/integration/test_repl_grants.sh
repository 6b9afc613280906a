#!/bin/bash
# Replication of grants and token marks (SPEC 2.1, 2.4; issue 3): a grant
# made at one site is honoured at the two others, a revoke at a third
# removes it everywhere, and HOTP and TOTP tokens used at one site are
# refused at the others once the mark has arrived.  Three real nodes;
# paloalto also runs an sshd so one grant goes through the real path.
. "$(dirname "$0")/lib.sh"

# Refused replays count as failures: keep the lockout out of the way.
t_cluster_up lockout_failures=50
t_sshd paloalto

t_section "users, enrollments and repositories made at paloalto reach the others"
t_suser paloalto alice
t_suser paloalto tina
AS=$(gd_base32_secret)
TS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll alice --hotp" t_c paloalto enroll alice --hotp --secret "$AS" --digits 6
t_expect 0 "paloalto: enroll tina --totp" t_c paloalto enroll tina --totp --secret "$TS"
t_expect 0 "paloalto: repo add r --mode required --writer alice --writer tina" \
	t_c paloalto repo add r --mode required --writer alice --writer tina
for s in portland montreal; do
	t_expect_soon 0 10 "$s: has user alice" t_has_user "$s" alice
	# exit 1 also comes back while the repository is unknown: wait for it
	t_expect_soon 0 10 "$s: knows repository r" eval 't_c "$s" repo list --json | grep -q "\"r\""'
	t_expect 1 "$s: check alice 127.0.7.7 r refused (repo known, no grant yet)" \
		t_c "$s" check alice 127.0.7.7 r
	t_hasnt "... not because r is unknown" "$OUT$ERR" "does not exist"
	t_has "... but for the missing grant" "$OUT$ERR" "2fa val"
done
t_expect_converged "the three sites agree" 10
t_run t_c portland check alice 127.0.7.7 r
t_has "portland's refusal names the missing grant" "$OUT$ERR" "2fa val"

t_section "a grant made at paloalto (over its sshd) is honoured at portland and montreal"
t_expect 0 "paloalto (sshd): alice 2fa val <hotp 0> from 127.0.7.7" \
	t_sssh paloalto 127.0.7.7 alice 2fa val "$(t_hotp "$AS" 0)"
for s in portland montreal; do
	t_expect_soon 0 5 "$s: check alice 127.0.7.7 r allowed" t_c "$s" check alice 127.0.7.7 r
	t_expect 0 "$s: alice 2fa isval from 127.0.7.7 is True" t_sh "$s" 127.0.7.7 alice 2fa isval
	t_expect 1 "$s: but not from 127.0.7.8" t_sh "$s" 127.0.7.8 alice 2fa isval
done
t_expect 0 "portland: grant list --user alice --json" t_c portland grant list --user alice --json
t_has "portland lists the grant, made at paloalto" "$OUT" paloalto

t_section "a grant made at montreal (grant-shell) is honoured at paloalto and portland"
t_expect 0 "montreal: alice 2fa val <hotp 1> from 127.0.7.9" t_sh montreal 127.0.7.9 alice 2fa val "$(t_hotp "$AS" 1)"
for s in paloalto portland; do
	t_expect_soon 0 5 "$s: check alice 127.0.7.9 r allowed" t_c "$s" check alice 127.0.7.9 r
done

t_section "a revoke at portland (a third site) removes paloalto's grant everywhere"
t_expect 0 "portland: grant revoke alice 127.0.7.7" t_c portland grant revoke alice 127.0.7.7
t_expect 1 "portland: check alice 127.0.7.7 r refused at once" t_c portland check alice 127.0.7.7 r
for s in paloalto montreal; do
	t_expect_soon 1 5 "$s: check alice 127.0.7.7 r refused" t_c "$s" check alice 127.0.7.7 r
	t_expect 0 "$s: the grant for 127.0.7.9 is still there" t_c "$s" check alice 127.0.7.9 r
done
t_expect 0 "paloalto: grant revoke alice all" t_c paloalto grant revoke alice all
for s in portland montreal; do
	t_expect_soon 1 5 "$s: check alice 127.0.7.9 r refused after 'revoke all' at paloalto" \
		t_c "$s" check alice 127.0.7.9 r
done
t_expect_converged "the three sites agree after the revokes" 10

t_section "HOTP: a counter used at one site is dead at the others"
# <hotp 0> was used at paloalto, <hotp 1> at montreal; the marks have
# arrived (the sites agree), so both, and everything before, are dead.
for s in paloalto portland montreal; do
	t_expect 1 "$s: <hotp 0> refused" t_sh "$s" 127.0.7.10 alice 2fa val "$(t_hotp "$AS" 0)"
	t_expect 1 "$s: <hotp 1> refused" t_sh "$s" 127.0.7.10 alice 2fa val "$(t_hotp "$AS" 1)"
done
t_expect 0 "portland: <hotp 4> accepted" t_sh portland 127.0.7.10 alice 2fa val "$(t_hotp "$AS" 4)"
t_expect_converged "the mark for <hotp 4> arrives everywhere" 5
for s in paloalto montreal; do
	t_expect 1 "$s: <hotp 4> (used at portland) refused" t_sh "$s" 127.0.7.11 alice 2fa val "$(t_hotp "$AS" 4)"
	t_expect 1 "$s: <hotp 3> (before the mark) refused" t_sh "$s" 127.0.7.11 alice 2fa val "$(t_hotp "$AS" 3)"
	t_expect 1 "$s: 127.0.7.11 got no grant" t_sh "$s" 127.0.7.11 alice 2fa isval
done
t_expect 0 "montreal: <hotp 5> accepted" t_sh montreal 127.0.7.11 alice 2fa val "$(t_hotp "$AS" 5)"

t_section "TOTP: a step used at one site is dead at the others"
t_totp_settle
now=$(date +%s)
prev=$(t_totp "$TS" $((now - 30)))
cur=$(t_totp "$TS" "$now")
t_expect 0 "portland: tina's previous-step value accepted" t_sh portland 127.0.7.7 tina 2fa val "$prev"
t_expect_converged "the mark arrives everywhere" 5
for s in paloalto montreal; do
	t_expect 1 "$s: the previous-step value (used at portland) refused" t_sh "$s" 127.0.7.8 tina 2fa val "$prev"
done
t_expect 0 "montreal: the current-step value accepted" t_sh montreal 127.0.7.8 tina 2fa val "$cur"
t_expect_converged "that mark arrives everywhere" 5
for s in paloalto portland montreal; do
	t_expect 1 "$s: the current-step value (used at montreal) refused" t_sh "$s" 127.0.7.9 tina 2fa val "$cur"
	t_expect 1 "$s: tina has no grant for 127.0.7.9" t_sh "$s" 127.0.7.9 tina 2fa isval
done
for s in paloalto portland; do
	t_expect 0 "$s: tina's grant for 127.0.7.8 (made at montreal) is honoured" t_c "$s" check tina 127.0.7.8 r
done

t_section "the end: all agree"
t_expect_converged "equal digests at all three sites" 10
for s in "${T_SITES[@]}"; do
	t_run t_sj "$s" 'j["replication"]["latency_us"]'
	t_check "$s: status --json reports replication latency of applied peer operations ($OUT)" \
		eval '[[ $OUT == *"\"p99\""* && $OUT != *"\"count\": 0"* ]]'
	# where those samples waited: the four stages, each p50 <= p99
	t_eq "$s: status --json splits the latency by stage" \
		"$(t_sj "$s" 'sorted(j["replication"]["latency_us"]["stages"]) == ["apply", "durable", "wire", "write"] and all(v["p50"] <= v["p99"] for v in j["replication"]["latency_us"]["stages"].values())')" true
	# the vector: one (origin, epoch, seq) per stream, summing to applied
	t_eq "$s: status --json's vector adds up to its applied counts" \
		"$(t_sj "$s" 'sum(e["seq"] for e in j["vector"]) == sum(j["applied"].values()) and len(j["vector"]) >= 3')" true
done
t_done
