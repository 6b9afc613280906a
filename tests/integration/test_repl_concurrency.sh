#!/bin/bash
# Concurrent writes (SPEC 2.3, 2.4; issue 3): grants and revokes of the
# same (user, IP) issued at the same moment at different sites converge to
# the same answer everywhere; in HLC order the later one wins.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=64
t_suser paloalto kim
KS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll kim --hotp" t_c paloalto enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "paloalto: repo add cc --mode required --writer kim" t_c paloalto repo add cc --mode required --writer kim
t_expect_converged "the three sites agree" 10
C=0   # next HOTP counter
val() { # SITE IP [days]
	local site=$1 ip=$2 days=${3-} tok
	tok=$(t_hotp "$KS" "$C"); C=$((C + 1))
	if [[ -n $days ]]; then
		t_sh "$site" "$ip" kim 2fa val-for-days "$days" "$tok"
	else
		t_sh "$site" "$ip" kim 2fa val "$tok"
	fi
}

t_section "in HLC order the later write wins"
t_expect 0 "paloalto: val from 127.0.9.1" val paloalto 127.0.9.1
t_expect_soon 0 5 "portland: the grant arrived" t_c portland check kim 127.0.9.1 cc
t_expect 0 "portland: then grant revoke kim 127.0.9.1" t_c portland grant revoke kim 127.0.9.1
t_expect_converged "all agree" 10
for s in "${T_SITES[@]}"; do
	t_expect 1 "$s: the later revoke won" t_c "$s" check kim 127.0.9.1 cc
done
t_expect 0 "montreal: then val again from 127.0.9.1" val montreal 127.0.9.1
t_expect_converged "all agree" 10
for s in "${T_SITES[@]}"; do
	t_expect 0 "$s: the later grant won" t_c "$s" check kim 127.0.9.1 cc
done

t_section "'revoke all' at portland racing vals at paloalto and montreal"
t1=$(t_hotp "$KS" "$C"); t2=$(t_hotp "$KS" $((C + 1))); C=$((C + 2))
(t_sh paloalto 127.0.9.2 kim 2fa val "$t1" >/dev/null 2>&1) & p1=$!
(t_c portland grant revoke kim all >/dev/null 2>&1) & p2=$!
(t_sh montreal 127.0.9.3 kim 2fa val "$t2" >/dev/null 2>&1) & p3=$!
wait "$p1"; r1=$?; wait "$p2"; r2=$?; wait "$p3"; r3=$?
# montreal's token is the later counter: always accepted; paloalto's may
# be refused (1) if montreal's mark got there first, never anything else
t_check "the racing writers did their part: val at paloalto $r1 (0 or 1), revoke all at portland $r2 (0), val at montreal $r3 (0)" \
	eval '[[ $r1 == [01] && $r2 == 0 && $r3 == 0 ]]'
t_expect_converged "all three converge" 10
for ip in 127.0.9.1 127.0.9.2 127.0.9.3; do
	ans=
	for s in "${T_SITES[@]}"; do
		t_c "$s" check kim "$ip" cc >/dev/null 2>&1
		ans+=" $?"
	done
	t_check "check kim $ip cc gives the same answer everywhere ($ans)" \
		eval '[[ $ans == " 0 0 0" || $ans == " 1 1 1" ]]'
done

t_section "races: re-grant at paloalto, revoke at portland, val-for-days at montreal, at once"
N=16
live=0
for ((i = 10; i < N + 10; i++)); do
	ip=127.0.9.$i
	val paloalto "$ip" >/dev/null 2>&1 || t_fail "paloalto: val from $ip"
done
for ((i = 10; i < N + 10; i++)); do
	t_wait_code 5 0 t_c portland check kim "127.0.9.$i" cc &&
		t_wait_code 5 0 t_c montreal check kim "127.0.9.$i" cc && live=$((live + 1))
done
t_eq "$N grants made at paloalto are live at portland and montreal" "$live" "$N"
# Three writers per address, started together; tokens are taken in order
# first so the background jobs do not share the counter.
ok=0 bad=
for ((i = 10; i < N + 10; i++)); do
	ip=127.0.9.$i
	t1=$(t_hotp "$KS" "$C"); t2=$(t_hotp "$KS" $((C + 1))); C=$((C + 2))
	(t_sh paloalto "$ip" kim 2fa val "$t1" >/dev/null 2>&1) &
	p1=$!
	(t_c portland grant revoke kim "$ip" >/dev/null 2>&1) &
	p2=$!
	if ((i % 2)); then
		(t_sh montreal "$ip" kim 2fa val-for-days 2 "$t2" >/dev/null 2>&1) &
	else
		(t_c montreal grant revoke kim "$ip" >/dev/null 2>&1) &
	fi
	p3=$!
	wait "$p1"; r1=$?; wait "$p2"; r2=$?; wait "$p3"; r3=$?
	# each writer does its part.  Odd rounds: the revoke (portland) finds
	# a live grant (0), montreal's later token is accepted (0), and
	# paloalto's earlier one is accepted or refused (1) if montreal's
	# mark got there first.  Even rounds: paloalto's token is the only
	# one (0); of the two revokes the first finds the grant (0), the
	# other may find it gone already (1), never both.
	if ((i % 2)); then
		[[ $r1 == [01] && $r2 == 0 && $r3 == 0 ]]
	else
		[[ $r1 == 0 && $r2 == [01] && $r3 == [01] && "$r2$r3" != 11 ]]
	fi
	if (($? == 0)); then
		ok=$((ok + 1))
	else
		bad+="$ip: $r1 $r2 $r3; "
	fi
done
t_eq "$N rounds of racing writes, every writer did its part ${bad:+($bad)}" "$ok" "$N"

t_section "everyone agrees"
t_expect_converged "all three converge (equal digests)" 15
agree=1 allowed=0 refused=0 detail=
for ((i = 10; i < N + 10; i++)); do
	ip=127.0.9.$i
	ans=
	for s in "${T_SITES[@]}"; do
		t_c "$s" check kim "$ip" cc >/dev/null 2>&1
		ans+=" $?"
	done
	[[ $ans == " 0 0 0" ]] && allowed=$((allowed + 1))
	[[ $ans == " 1 1 1" ]] && refused=$((refused + 1))
	[[ $ans == " 0 0 0" || $ans == " 1 1 1" ]] || { agree=0; detail+="$ip:$ans; "; }
done
t_check "check answers agree at all sites for all $N addresses ($allowed allowed, $refused refused) $detail" test "$agree" = 1
g0=$(t_c paloalto grant list --user kim --json | t_json 'sorted(j, key=json.dumps)')
for s in portland montreal; do
	t_eq "$s: grant list --user kim --json equals paloalto's" \
		"$(t_c "$s" grant list --user kim --json | t_json 'sorted(j, key=json.dumps)')" "$g0"
done
t_done
