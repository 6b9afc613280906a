#!/bin/bash
# grant-keys as sshd's AuthorizedKeysCommand (SPEC 3.4) and the user store:
# every active user's keys become forced-command lines; a key not in the
# store, or of a deleted user, does not get in; admin enroll/unenroll.
# sshd here passes the offered key's fingerprint (%u %f): grant-keys then
# prints the one line of that key, from the node's fingerprint index, which
# a store made before the index gets at its next start.
. "$(dirname "$0")/lib.sh"

t_site_up
t_user kate
gd_user_key "$T_KEYS/kate2"
gd_user_key "$T_KEYS/mallory"
t_expect 0 "user add leo with two keys" \
	t_ctl user add leo --key "$T_KEYS/kate2.pub" --key "$T_KEYS/mallory.pub"
t_expect 0 "user del leo" t_ctl user del leo
gd_user_key "$T_KEYS/leo"
t_expect 0 "user add leo again with a new key" t_ctl user add leo --key "$T_KEYS/leo.pub"

t_section "grant-keys output"
t_expect 0 "grant-keys --config F root" "$GD_BIN/grant-keys" --config "$T_SITE/grantd.conf" root
KEYS=$OUT
t_eq "one line per active key (kate, leo)" "$(grep -c . <<<"$KEYS")" 2
for u in kate leo; do
	line=$(grep -F "$(cut -d' ' -f2 "$T_KEYS/$u.pub")" <<<"$KEYS")
	t_check "$u's line starts with command=\"<absolute grant-shell>" \
		eval '[[ $line == "command=\"/"*"grant-shell "* ]]'
	t_has "$u's line passes --config and the user name" "$line" "--config $T_SITE/grantd.conf $u\""
	for o in no-pty no-port-forwarding no-agent-forwarding no-X11-forwarding; do
		t_has "$u's line has $o" "$line" "$o"
	done
done
t_hasnt "the deleted user's old keys are gone" "$KEYS" "$(cut -d' ' -f2 "$T_KEYS/mallory.pub")"
t_expect 0 "grant-keys via GRANTD_CONFIG" env GRANTD_CONFIG="$T_SITE/grantd.conf" "$GD_BIN/grant-keys" root
t_eq "prints the same lines, without --config" "$(grep -c 'grant-shell ' <<<"$OUT")" 2

t_section "grant-keys ACCOUNT FINGERPRINT (sshd's %f)"
fp() { ssh-keygen -lf "$1" | cut -d' ' -f2; }
gk() { "$GD_BIN/grant-keys" --config "$T_SITE/grantd.conf" root "$@"; }
t_has "the test's sshd passes the fingerprint" "$(<"$T_SITE/ssh/sshd_config")" \
	"grant-keys --config $T_SITE/grantd.conf %u %f"
t_expect 0 "grant-keys root FP(leo)" gk "$(fp "$T_KEYS/leo.pub")"
t_eq "one line" "$(grep -c . <<<"$OUT")" 1
t_eq "the line keys.list gives for leo's key" "$OUT" "$(grep -F "$(cut -d' ' -f2 "$T_KEYS/leo.pub")" <<<"$KEYS")"
t_expect 0 "grant-keys root FP(kate)" gk "$(fp "$T_KEYS/kate.pub")"
t_has "kate's line" "$OUT" "--config $T_SITE/grantd.conf kate\""
t_hasnt "not leo's (another user's key gives nothing of his)" "$OUT" " leo\""
t_expect 0 "FP of a deleted user's old key" gk "$(fp "$T_KEYS/mallory.pub")"
t_eq "prints nothing" "$OUT" ""
gd_user_key "$T_KEYS/nobody"
t_expect 0 "FP of a key no user has" gk "$(fp "$T_KEYS/nobody.pub")"
t_eq "prints nothing" "$OUT" ""
t_expect 2 "a fingerprint that is none is a usage error" gk "MD5:00:11"
t_expect 0 "a fingerprint's case matters (base64)" gk "$(fp "$T_KEYS/leo.pub" | tr 'a-z' 'A-Z')"
t_eq "prints nothing" "$OUT" ""

t_section "ssh logins"
t_expect 0 "kate logs in (2fa help)" t_ssh 127.0.7.7 kate 2fa help
t_expect 0 "leo logs in with his new key" t_ssh 127.0.7.7 leo 2fa help
t_expect 255 "mallory's key (not in the store) is refused by sshd" t_ssh 127.0.7.7 mallory 2fa help
t_has "Permission denied" "$ERR" "Permission denied"
t_expect 0 "user list --json" t_ctl user list --json
t_eq "user list --json has kate and leo" "$(t_json 'sorted(u["name"] for u in j)' <<<"$OUT")" '["kate", "leo"]'
t_expect 0 "user del kate" t_ctl user del kate
t_expect 0 "at once: grant-keys root FP(kate)" gk "$(fp "$T_KEYS/kate.pub")"
t_eq "prints nothing" "$OUT" ""
t_expect 255 "kate can no longer log in" t_ssh 127.0.7.7 kate 2fa help
t_expect nz "user del kate again fails" t_ctl user del kate
t_expect nz "user add leo (exists) fails" t_ctl user add leo --key "$T_KEYS/leo.pub"

t_section "a store made before the fingerprint index"
t_check "grantd stops" gd_grantd_stop "$T_SITE"
GRANTD_TEST_FAULT_AT=no-keyfp gd_grantd_start "$T_SITE" || t_fatal "grantd starts (GRANTD_TEST_FAULT_AT=no-keyfp)"
t_user nora
t_expect 0 "without the index, FP(nora) finds nothing (an older grantd)" gk "$(fp "$T_KEYS/nora.pub")"
t_eq "prints nothing" "$OUT" ""
t_expect 255 "nora cannot log in yet" t_ssh 127.0.7.7 nora 2fa help
t_check "grantd stops" gd_grantd_stop "$T_SITE"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts again"
t_check "the index was built at open" grep -q "ssh keys indexed by fingerprint" "$T_SITE/grantd.log"
t_expect 0 "grant-keys root FP(nora)" gk "$(fp "$T_KEYS/nora.pub")"
t_has "nora's line" "$OUT" "--config $T_SITE/grantd.conf nora\""
t_expect 0 "FP(leo) too" gk "$(fp "$T_KEYS/leo.pub")"
t_has "leo's line" "$OUT" " leo\""
t_expect 0 "nora logs in through sshd" t_ssh 127.0.7.7 nora 2fa help
t_expect 0 "leo logs in through sshd" t_ssh 127.0.7.7 leo 2fa help

t_section "admin enroll and unenroll"
S=$(gd_base32_secret)
t_expect 0 "repo add k --mode required --writer leo" t_ctl repo add k --mode required --writer leo
t_expect 0 "enroll leo --hotp --digits 8 --counter 10" t_ctl enroll leo --hotp --secret "$S" --digits 8 --counter 10
t_expect 1 "check leo 127.0.7.7 k exits 1 (enrolled, no grant)" t_ctl check leo 127.0.7.7 k
t_expect 1 "leo: a counter before --counter 10 is refused" t_ssh 127.0.7.7 leo 2fa val "$(t_hotp "$S" 5 8)"
t_expect 0 "leo: 2fa val <8-digit hotp 10> (admin enrollment is active at once)" \
	t_ssh 127.0.7.7 leo 2fa val "$(t_hotp "$S" 10 8)"
t_expect 0 "check leo 127.0.7.7 k exits 0" t_ctl check leo 127.0.7.7 k
t_expect nz "enroll leo again is refused (already enrolled)" t_ctl enroll leo --totp --secret "$S"
t_expect 0 "grantctl unenroll leo" t_ctl unenroll leo
t_expect 1 "check leo 127.0.7.7 k exits 1 (not enrolled, required)" t_ctl check leo 127.0.7.7 k
t_expect 0 "enroll leo --totp without --secret" t_ctl enroll leo --totp
t_has "prints the otpauth:// URI once" "$OUT" "otpauth://totp/"
t_check "the new secret is not in grantd.log" \
	eval '! grep -qF "$(grep -oE "secret=[A-Z2-7]+" <<<"$OUT" | head -1 | cut -d= -f2)" "$T_SITE/grantd.log"'

t_done
