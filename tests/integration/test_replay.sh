#!/bin/bash
# No replay (SPEC 2.1): an accepted HOTP counter or TOTP step, and every one
# before it, is dead for that user, from any address.
. "$(dirname "$0")/lib.sh"

t_site_up lockout_failures=50   # replays are failures too: keep lockout out of the way
t_user hugo
t_user tina
HS=$(gd_base32_secret)
TS=$(gd_base32_secret)
t_expect 0 "enroll hugo --hotp --digits 6" t_ctl enroll hugo --hotp --secret "$HS" --digits 6
t_expect 0 "enroll tina --totp" t_ctl enroll tina --totp --secret "$TS"

t_section "HOTP"
t_expect 0 "hugo: 2fa val <hotp 0> from 127.0.7.7" t_ssh 127.0.7.7 hugo 2fa val "$(t_hotp "$HS" 0)"
t_expect 1 "hugo: the same value again from 127.0.7.8 is refused" t_ssh 127.0.7.8 hugo 2fa val "$(t_hotp "$HS" 0)"
t_expect 1 "hugo: 127.0.7.8 got no grant" t_ssh 127.0.7.8 hugo 2fa isval
t_expect 0 "hugo: <hotp 5> accepted (inside hotp_lookahead)" t_ssh 127.0.7.8 hugo 2fa val "$(t_hotp "$HS" 5)"
t_expect 1 "hugo: <hotp 3>, before the mark, refused" t_ssh 127.0.7.9 hugo 2fa val "$(t_hotp "$HS" 3)"
t_expect 1 "hugo: <hotp 5> again refused" t_ssh 127.0.7.9 hugo 2fa val "$(t_hotp "$HS" 5)"
t_expect 1 "hugo: 127.0.7.9 got no grant" t_ssh 127.0.7.9 hugo 2fa isval
t_expect 0 "hugo: <hotp 6> accepted" t_ssh 127.0.7.9 hugo 2fa val "$(t_hotp "$HS" 6)"
t_expect 1 "hugo: <hotp 40>, beyond hotp_lookahead (20) of the mark, refused" \
	t_ssh 127.0.7.10 hugo 2fa val "$(t_hotp "$HS" 40)"

t_section "TOTP"
t_totp_settle
now=$(date +%s)
prev=$(t_totp "$TS" $((now - 30)))
cur=$(t_totp "$TS" "$now")
t_expect 0 "tina: the previous step's value accepted (totp_window 1)" t_ssh 127.0.7.7 tina 2fa val "$prev"
t_expect 0 "tina: the current step's value accepted" t_ssh 127.0.7.8 tina 2fa val "$cur"
t_expect 1 "tina: the previous step's value again refused" t_ssh 127.0.7.9 tina 2fa val "$prev"
t_expect 1 "tina: the current step's value again refused" t_ssh 127.0.7.9 tina 2fa val "$cur"
t_expect 1 "tina: 127.0.7.9 got no grant" t_ssh 127.0.7.9 tina 2fa isval
t_expect 1 "tina: a value two steps ahead (outside the window) refused" \
	t_ssh 127.0.7.9 tina 2fa val "$(t_totp "$TS" $((now + 60)))"

t_section "marks survive a restart"
gd_grantd_stop "$T_SITE" || t_fail "grantd stops on SIGTERM"
gd_grantd_start "$T_SITE" || t_fatal "grantd restarts"
t_expect 1 "hugo: <hotp 6> still refused after restart" t_ssh 127.0.7.10 hugo 2fa val "$(t_hotp "$HS" 6)"
t_expect 1 "tina: the current value still refused after restart" t_ssh 127.0.7.10 tina 2fa val "$cur"

t_done
