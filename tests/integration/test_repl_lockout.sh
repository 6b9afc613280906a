#!/bin/bash
# Brute force does not scale with sites (SPEC 2.7; issue 3): failed token
# attempts are operations too, so with lockout_failures=3 one failure at
# each of the three sites locks the user everywhere; an unlock at any site
# lifts it everywhere.  Bursts of wrong guesses at two sites at once
# (tests/tools/burst, one connection each): each site judges at most
# lockout_failures, and once the failures have replicated every site counts
# each judged attempt exactly once.
. "$(dirname "$0")/lib.sh"

# locked_msg TEXT N USER: TEXT has the lockout refusal, word for word: N
# failed attempts counted, and the command that lifts it.
locked_msg() {
	grep -qxE "Rate-limit reached: $2 failed attempts; try again in [0-9]+[dhms]( [0-9]+[dhms])?, or ask an administrator to run 'grantctl unlock $3'" <<<"$1"
}

N=1000
declare -A BURST_PID=()
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
	t_check "$s: the refusal says lou is locked after 3 failures and how to unlock" \
		locked_msg "$ERR" 3 lou
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

t_section "bursts of $N guesses at two sites at once: each judges at most 3, and both lock"
t_suser paloalto bo
BOS=$(gd_base32_secret)
t_expect 0 "paloalto: enroll bo --hotp" t_c paloalto enroll bo --hotp --secret "$BOS" --digits 6
t_expect_converged "bo is known everywhere" 10
BOBAD=$(t_bad_hotp "$BOS" 0 60)
for s in paloalto portland; do
	"$GD_BIN/burst" --config "$(t_dir "$s")/grantd.conf" bo 127.0.7.20 "$N" "$BOBAD" \
		>"$T_DIR/burst.$s" 2>&1 &
	BURST_PID[$s]=$!
done
JUDGED=0
for s in paloalto portland; do
	wait "${BURST_PID[$s]}"
	t_eq "$s: burst answered (exit 0)" "$?" 0
	got=$(<"$T_DIR/burst.$s")
	[[ $got =~ ^sent=$N\ ok=0\ failed=([0-9]+)\ locked=([0-9]+)\ other=0$ ]] ||
		{ t_fail "$s: burst counts" "$got"; continue; }
	f=${BASH_REMATCH[1]} l=${BASH_REMATCH[2]}
	t_check "$s: at most 3 of $N judged ($f), the rest refused as locked ($l)" \
		test "$f" -le 3 -a $((f + l)) -eq "$N"
	JUDGED=$((JUDGED + f))
done
t_check "at least 3 judged in all ($JUDGED)" test "$JUDGED" -ge 3
bo_locked() {
	[[ $(t_c "$1" user list --json | t_json '[u["locked"] for u in j if u["name"] == "bo"]') == "[true]" ]]
}
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 10 "$s: bo is locked" bo_locked "$s"
done
t_expect_converged "the failures reach every site" 10
for s in "${T_SITES[@]}"; do
	t_run t_sh "$s" 127.0.7.21 bo 2fa val "$(t_hotp "$BOS" 0)"
	t_eq "$s: bo's good token refused (locked)" "$RC" 1
	t_check "$s: every judged attempt counted once, at every site ($JUDGED)" \
		locked_msg "$ERR" "$JUDGED" bo
done
t_done
