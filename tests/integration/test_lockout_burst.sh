#!/bin/bash
# Brute force in one burst (SPEC 2.7): every failed attempt counts once,
# however many share a millisecond or a control batch.  tests/tools/burst
# queues 1,000 wrong guesses and then a valid token on one connection to the
# user socket, so the node reads them in as few batches as it can: exactly
# lockout_failures guesses are judged, every later request (the valid token
# too) is refused as locked, and the lock holds for grant-shell afterwards.
. "$(dirname "$0")/lib.sh"

# locked_msg TEXT N USER: TEXT has the lockout refusal, word for word: N
# failed attempts counted, and the command that lifts it.
locked_msg() {
	grep -qxE "Rate-limit reached: $2 failed attempts; try again in [0-9]+[dhms]( [0-9]+[dhms])?, or ask an administrator to run 'grantctl unlock $3'" <<<"$1"
}

N=1000
t_site_up lockout_failures=5 lockout_window=15m hotp_lookahead=20
t_user dave
t_user erin
DS=$(gd_base32_secret)
ES=$(gd_base32_secret)
t_expect 0 "enroll dave --hotp" t_ctl enroll dave --hotp --secret "$DS" --digits 6
t_expect 0 "enroll erin --hotp" t_ctl enroll erin --hotp --secret "$ES" --digits 6
DBAD=$(t_bad_hotp "$DS" 0 60)
EBAD=$(t_bad_hotp "$ES" 0 60)

t_section "$N wrong guesses and then a valid token, in one burst"
t_expect 0 "burst of $N + 1 answered" \
	"$GD_BIN/burst" --config "$T_SITE/grantd.conf" dave 127.0.7.7 "$N" "$DBAD" "$(t_hotp "$DS" 0)"
t_eq "exactly 5 guesses judged, the rest and the valid token refused as locked" \
	"$OUT" "sent=$((N + 1)) ok=0 failed=5 locked=$((N + 1 - 5)) other=0"
t_check "every answer delivered (the node logged no 'reply not delivered')" \
	eval '! grep -F "reply not delivered" "$T_SITE/grantd.log"'
t_expect 0 "user list --json" t_ctl user list --json
t_eq "dave is locked" "$(t_json '[u["locked"] for u in j if u["name"] == "dave"]' <<<"$OUT")" "[true]"
t_expect 1 "dave: the next valid token through sshd is refused" \
	t_ssh 127.0.7.8 dave 2fa val "$(t_hotp "$DS" 1)"
t_check "the refusal counts exactly the 5 judged attempts and names the unlock" \
	locked_msg "$ERR" 5 dave
t_expect 1 "dave has no grant for 127.0.7.8" t_ssh 127.0.7.8 dave 2fa isval

t_section "a burst below the limit is judged in full, and the limit still holds"
t_expect 0 "burst of 4" "$GD_BIN/burst" --config "$T_SITE/grantd.conf" erin 127.0.7.9 4 "$EBAD"
t_eq "all 4 judged" "$OUT" "sent=4 ok=0 failed=4 locked=0 other=0"
t_expect 0 "burst of 3 more and a valid token" \
	"$GD_BIN/burst" --config "$T_SITE/grantd.conf" erin 127.0.7.9 3 "$EBAD" "$(t_hotp "$ES" 0)"
t_eq "one more judged (the 5th), then locked" "$OUT" "sent=4 ok=0 failed=1 locked=3 other=0"

t_section "grantctl unlock forgives them; later failures count again"
t_expect 0 "grantctl unlock dave" t_ctl unlock dave
t_expect 0 "burst of $N after the unlock" \
	"$GD_BIN/burst" --config "$T_SITE/grantd.conf" dave 127.0.7.7 "$N" "$DBAD"
t_eq "exactly 5 judged again" "$OUT" "sent=$N ok=0 failed=5 locked=$((N - 5)) other=0"
t_expect 0 "grantctl unlock dave" t_ctl unlock dave
t_expect 0 "dave: a valid token is accepted after the unlock" \
	t_ssh 127.0.7.8 dave 2fa val "$(t_hotp "$DS" 1)"
t_done
