#!/bin/bash
# Brute force (SPEC 2.7): lockout_failures bad tokens within lockout_window
# lock the user (from whatever addresses they came); a good token is then
# refused too, until `grantctl unlock`.
. "$(dirname "$0")/lib.sh"

# locked_msg TEXT N USER: TEXT has the lockout refusal, word for word: N
# failed attempts counted, and the command that lifts it.
locked_msg() {
	grep -qxE "Rate-limit reached: $2 failed attempts; try again in [0-9]+[dhms]( [0-9]+[dhms])?, or ask an administrator to run 'grantctl unlock $3'" <<<"$1"
}

t_site_up lockout_failures=3 lockout_window=15m
t_user lou
t_user ben
LS=$(gd_base32_secret)
BS=$(gd_base32_secret)
t_expect 0 "enroll lou --hotp" t_ctl enroll lou --hotp --secret "$LS" --digits 6
t_expect 0 "enroll ben --hotp" t_ctl enroll ben --hotp --secret "$BS" --digits 6
t_expect 0 "repo add locked --mode required --writer lou" t_ctl repo add locked --mode required --writer lou
LBAD=$(t_bad_hotp "$LS" 0 60)
BBAD=$(t_bad_hotp "$BS" 0 60)

t_section "below the limit nothing happens"
t_expect 1 "ben: bad token 1 refused" t_ssh 127.0.7.7 ben 2fa val "$BBAD"
t_expect 1 "ben: bad token 2 refused" t_ssh 127.0.7.7 ben 2fa val "$BBAD"
t_expect 0 "ben: a good token is still accepted after 2 failures (limit 3)" \
	t_ssh 127.0.7.7 ben 2fa val "$(t_hotp "$BS" 0)"

t_section "lockout after 3 failures from 3 addresses"
t_expect 1 "lou: bad token from 127.0.7.7 refused" t_ssh 127.0.7.7 lou 2fa val "$LBAD"
t_expect 1 "lou: bad token from 127.0.7.8 refused" t_ssh 127.0.7.8 lou 2fa val "$LBAD"
t_expect 1 "lou: bad token from 127.0.7.9 refused" t_ssh 127.0.7.9 lou 2fa val "$LBAD"
t_expect 1 "lou: a good token is refused while locked" t_ssh 127.0.7.10 lou 2fa val "$(t_hotp "$LS" 0)"
t_check "the refusal says lou is locked after 3 failures and how to unlock" locked_msg "$ERR" 3 lou
t_expect 1 "lou: 127.0.7.10 got no grant" t_ssh 127.0.7.10 lou 2fa isval
t_expect 1 "check lou 127.0.7.10 locked exits 1" t_ctl check lou 127.0.7.10 locked
t_expect 0 "ben (another user) is not locked" t_ssh 127.0.7.9 ben 2fa val "$(t_hotp "$BS" 1)"

t_section "the lock survives a restart"
gd_grantd_stop "$T_SITE" || t_fail "grantd stops on SIGTERM"
gd_grantd_start "$T_SITE" || t_fatal "grantd restarts"
t_expect 1 "lou: still locked after restart" t_ssh 127.0.7.10 lou 2fa val "$(t_hotp "$LS" 1)"

t_section "grantctl unlock"
t_expect nz "unlock of an unknown user fails" t_ctl unlock nosuchuser
t_expect 2 "unlock 'B@d' exits 2" t_ctl unlock 'B@d'
t_expect 0 "grantctl unlock lou" t_ctl unlock lou
t_expect 0 "lou: a good token is accepted after unlock" t_ssh 127.0.7.10 lou 2fa val "$(t_hotp "$LS" 2)"
t_expect 0 "lou: 2fa isval from 127.0.7.10 is True" t_ssh 127.0.7.10 lou 2fa isval
t_expect 0 "check lou 127.0.7.10 locked exits 0" t_ctl check lou 127.0.7.10 locked

t_done
