#!/bin/bash
# Self-service enrollment over ssh (SPEC 3.2): `2fa enroll totp|yubikey`
# shows the secret, the otpauth:// URI and 5 scratch codes; the enrollment
# becomes active at the first good `2fa val`; scratch codes work once;
# `2fa unenroll` needs a token.  Beside gitolite ([gitolite] home), the
# same commands through gitolite's commands/2fa (grant-shell --gitolite,
# GL_USER) make the user record at enrollment, and VREF/2fa (grant-shell
# --gitolite-vref) decides the 2-factor part of a push (no gitolite needed:
# the LOCAL_CODE scripts run as gitolite runs them).
. "$(dirname "$0")/lib.sh"

t_site_up lockout_failures=50   # refused tokens below must not lock erin
t_user erin
t_user yuki
t_expect 0 "repo add opt --mode opt-in --writer erin" t_ctl repo add opt --mode opt-in --writer erin
t_expect 0 "repo add req --mode required --writer erin" t_ctl repo add req --mode required --writer erin
t_clone 127.0.7.9 erin opt "$T_DIR/opt" || t_fatal "clone opt"
t_clone 127.0.7.9 erin req "$T_DIR/req" || t_fatal "clone req"

# uri_param URI NAME: a query parameter of an otpauth:// URI.
uri_param() {
	python3 -c '
import sys, urllib.parse
q = urllib.parse.parse_qs(urllib.parse.urlparse(sys.argv[1]).query)
print(q.get(sys.argv[2], [""])[0])' "$1" "$2"
}

t_section "2fa enroll totp"
t_expect 0 "erin: 2fa enroll totp" t_ssh 127.0.7.7 erin 2fa enroll totp
ENROLL_OUT=$OUT
URI=$(grep -oE 'otpauth://totp/[^[:space:]]+' <<<"$ENROLL_OUT" | head -1)
t_check "the output has an otpauth://totp/ URI" test -n "$URI"
ES=$(uri_param "$URI" secret)
t_check "the URI carries a 160-bit base32 secret (32 characters)" eval '[[ $ES =~ ^[A-Z2-7]{32}$ ]]'
t_has "the secret is shown" "$ENROLL_OUT" "$ES"
H=$(hostname)   # without [node] host the node names the machine
t_eq "the URI's label is HOST:USER (no [node] host: the machine's name)" \
	"$(python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(urllib.parse.urlparse(sys.argv[1]).path))' "$URI")" "/$H:erin"
t_eq "its issuer is HOST" "$(uri_param "$URI" issuer)" "$H"
t_check "a QR code is drawn (more than 15 lines of output)" \
	eval '(( $(wc -l <<<"$ENROLL_OUT") > 15 ))'
mapfile -t SCRATCH < <(grep -oE '(^|[^0-9A-Za-z])[0-9]{8}([^0-9A-Za-z]|$)' <<<"$ENROLL_OUT" | grep -oE '[0-9]{8}' | tail -n 5)
t_eq "5 scratch codes of 8 digits" "${#SCRATCH[@]}" 5

t_section "not active before the first val"
t_commit "$T_DIR/opt"
t_expect 0 "erin may push to opt-in before her first val (not enrolled yet)" t_push 127.0.7.7 erin "$T_DIR/opt"
t_expect 1 "erin: a wrong token does not activate" t_ssh 127.0.7.7 erin 2fa val "$(t_bad_hotp "$ES" 0 0)"
t_totp_settle
t_expect 0 "erin: 2fa val <totp> activates the enrollment" t_ssh 127.0.7.7 erin 2fa val "$(t_totp "$ES")"
t_commit "$T_DIR/opt"
t_expect nz "erin may no longer push to opt-in from 127.0.7.8 (enrolled, no grant)" t_push 127.0.7.8 erin "$T_DIR/opt"
t_expect 0 "erin pushes to opt-in from 127.0.7.7" t_push 127.0.7.7 erin "$T_DIR/opt"
t_expect 1 "erin: 2fa enroll totp again is refused" t_ssh 127.0.7.7 erin 2fa enroll totp
t_has "and says how to unenroll first" "$ERR$OUT" "unenroll"

t_section "scratch codes"
t_expect 0 "erin: 2fa val <scratch 1> from 127.0.7.8" t_ssh 127.0.7.8 erin 2fa val "${SCRATCH[0]}"
t_expect 0 "127.0.7.8 is whitelisted" t_ssh 127.0.7.8 erin 2fa isval
t_expect 1 "erin: <scratch 1> again is refused" t_ssh 127.0.7.9 erin 2fa val "${SCRATCH[0]}"
t_expect 0 "erin: <scratch 2> from 127.0.7.9" t_ssh 127.0.7.9 erin 2fa val "${SCRATCH[1]}"
t_expect 1 "erin: a made-up 8-digit code is refused" t_ssh 127.0.7.10 erin 2fa val 13572468

t_section "unenroll"
t_expect nz "erin: 2fa unenroll without a token is refused" t_ssh 127.0.7.7 erin 2fa unenroll
t_expect 1 "erin: 2fa unenroll with a used scratch code is refused" t_ssh 127.0.7.7 erin 2fa unenroll "${SCRATCH[0]}"
t_expect 0 "erin: 2fa unenroll <scratch 3>" t_ssh 127.0.7.7 erin 2fa unenroll "${SCRATCH[2]}"
t_expect 1 "erin's grants went with the enrollment" t_ssh 127.0.7.7 erin 2fa isval
t_commit "$T_DIR/req"
t_expect nz "erin (no longer enrolled) may not push to required" t_push 127.0.7.7 erin "$T_DIR/req"
t_has "and is told how to enroll" "$ERR" "2fa enroll"
t_commit "$T_DIR/opt"
t_expect 0 "erin (no longer enrolled) pushes to opt-in from anywhere" t_push 127.0.7.10 erin "$T_DIR/opt"

t_section "2fa enroll yubikey (HOTP)"
t_expect 0 "yuki: 2fa enroll yubikey" t_ssh 127.0.7.7 yuki 2fa enroll yubikey
YOUT=$OUT
t_has "the ykpersonalize line" "$YOUT" "ykpersonalize -1 -ooath-hotp -oappend-cr -a"
HEX=$(grep -oE 'ykpersonalize -1 -ooath-hotp -oappend-cr -a[0-9a-fA-F]+' <<<"$YOUT" | head -1 | sed 's/.*-a//')
t_check "the hex key is 40 hex digits" eval '[[ ${#HEX} == 40 ]]'
YURI=$(grep -oE 'otpauth://hotp/[^[:space:]]+' <<<"$YOUT" | head -1)
t_check "the output has an otpauth://hotp/ URI" test -n "$YURI"
YD=$(uri_param "$YURI" digits); YD=${YD:-6}
YC=$(uri_param "$YURI" counter); YC=${YC:-0}
t_expect 0 "yuki: 2fa val <hotp from the hex key>" \
	t_ssh 127.0.7.7 yuki 2fa val "$(oathtool --hotp -d "$YD" -c "$YC" "$HEX")"
t_expect 1 "yuki: the same value again is refused" \
	t_ssh 127.0.7.8 yuki 2fa val "$(oathtool --hotp -d "$YD" -c "$YC" "$HEX")"
t_expect 0 "yuki: the next value is accepted" \
	t_ssh 127.0.7.8 yuki 2fa val "$(oathtool --hotp -d "$YD" -c $((YC + 1)) "$HEX")"

t_section "grantctl enroll: secret lengths (RFC 4226: at least 128 bits)"
t_user adam
t_user bea
t_user cal
t_expect 0 "grantctl enroll adam --totp (no --secret)" t_ctl enroll adam --totp
AS=$(grep -oE 'Secret \(base32\): [A-Z2-7]+' <<<"$OUT" | sed 's/.*: //')
t_check "the made secret has 160 bits (32 base32 characters)" eval '[[ $AS =~ ^[A-Z2-7]{32}$ ]]'
SHORT=$(head -c 10 /dev/urandom | base32 | tr -d '=\n')   # 80 bits
S120=$(head -c 15 /dev/urandom | base32 | tr -d '=\n')    # 120 bits
D0=$(t_digest)
t_expect 2 "an 80-bit --secret is refused (exit 2)" t_ctl enroll bea --totp --secret "$SHORT"
t_one_line "with a one-line message" "$ERR"
t_has "which names the minimum" "$ERR" "128 bits"
t_has "and the way out for migrated tokens" "$ERR" "--allow-short-secret"
t_expect 2 "a 120-bit --secret is refused (exit 2)" t_ctl enroll bea --hotp --secret "$S120"
t_eq "the refusals changed nothing (digest)" "$(t_digest)" "$D0"
t_expect 0 "user list --json" t_ctl user list --json
t_eq "bea is not enrolled" "$(t_json '[u for u in j if u["name"] == "bea"][0]["enrolled"]' <<<"$OUT")" no
t_expect 0 "--allow-short-secret takes an 80-bit secret (a migrated token)" \
	t_ctl enroll bea --totp --secret "$SHORT" --allow-short-secret
t_check "the node logs a warning" grep -q 'short secret user=bea' "$T_SITE/grantd.log"
t_check "without the secret" eval '! grep -qF "$SHORT" "$T_SITE/grantd.log"'
t_totp_settle
t_expect 0 "bea: 2fa val with the short-secret TOTP" t_ssh 127.0.7.7 bea 2fa val "$(t_totp "$SHORT")"
t_expect 2 "--allow-short-secret does not take less than 80 bits" \
	t_ctl enroll cal --totp --secret "$(head -c 5 /dev/urandom | base32 | tr -d '=\n')" --allow-short-secret

t_section "grantctl enroll --secret-file FILE|- (argv is readable by every local user)"
t_user dan
t_user fay
DS=$(gd_base32_secret)
FS=$(gd_base32_secret)
(umask 077; printf '  %s  \n' "$DS" >"$T_DIR/dan.secret")
t_expect 0 "enroll dan --hotp --secret-file FILE" t_ctl enroll dan --hotp --secret-file "$T_DIR/dan.secret"
t_hasnt "the secret is not echoed" "$OUT$ERR" "$DS"
t_expect 0 "dan: 2fa val with the file's secret" t_ssh 127.0.7.7 dan 2fa val "$(t_hotp "$DS" 0)"
t_expect 0 "enroll fay --hotp --secret-file - (stdin)" t_ctl enroll fay --hotp --secret-file - <<<"$FS"
t_expect 0 "fay: 2fa val with the secret from stdin" t_ssh 127.0.7.7 fay 2fa val "$(t_hotp "$FS" 0)"
t_expect 2 "--secret-file with a missing file exits 2" t_ctl enroll cal --totp --secret-file "$T_DIR/nonesuch"
t_one_line "with a one-line message" "$ERR"
t_has "naming the file" "$ERR" "$T_DIR/nonesuch"
t_expect 2 "--secret-file - with nothing on stdin exits 2" t_ctl enroll cal --totp --secret-file - </dev/null
t_expect 2 "an 80-bit secret from --secret-file is refused too" t_ctl enroll cal --totp --secret-file - <<<"$SHORT"
t_expect 0 "grantctl --help warns about --secret on the command line" t_ctl --help
t_has "it names --secret-file" "$OUT" "--secret-file FILE|-"
t_has "and says argv is readable" "$OUT" "every"

t_section "beside gitolite: commands/2fa and VREF/2fa ([gitolite] home)"
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
mkdir -p "$T_DIR/glhome/repositories" && : >"$T_DIR/glhome/.gitolite.rc"
printf '\n[gitolite]\nhome = %s\nprogram = /bin/true\n' "$T_DIR/glhome" >>"$T_SITE/grantd.conf"
# [node] host: the name users ssh to, in every hint and otpauth URI
H=git.example.org
sed -i "/^\[node\]/a host = $H" "$T_SITE/grantd.conf"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts in gitolite mode"
GLC=$GD_BIN/../share/grantd/gitolite
for f in commands/2fa VREF/2fa hooks/common/post-receive commands/grantd-admin-sync; do
	t_check "the build tree's LOCAL_CODE has an executable $f" test -x "$GLC/$f"
done
t_eq "hooks/common holds post-receive alone (gitolite links every file there)" \
	"$(ls -A "$GLC/hooks/common")" post-receive
t_check "commands/2fa runs this build's grant-shell" grep -qF "$GD_BIN/grant-shell' --gitolite --" "$GLC/commands/2fa"

# gl2fa SRCIP USER WORD...: `ssh git@HOST 2fa WORD...` as gitolite runs it
# (GL_USER; its words, "2fa" not among them); USER "" unsets GL_USER.
gl2fa() {
	local src=$1 user=$2; shift 2
	env ${user:+GL_USER=$user} SSH_CONNECTION="$src 40022 $T_ADDR 22" \
		GRANTD_CONFIG="${GLCONF:-$T_SITE/grantd.conf}" "$GLC/commands/2fa" "$@" </dev/null
}
# glvref SRCIP USER VREF [ARG...]: gitolite's update hook running VREF (a
# push of one ref to demo; VREF/2fa/optin gives the extra argument optin).
glvref() {
	local src=$1 user=$2 vref=$3 rest
	IFS=/ read -ra rest <<<"${vref#VREF/2fa}"
	GL_USER=$user GL_REPO=demo SSH_CONNECTION="$src 40022 $T_ADDR 22" \
		GRANTD_CONFIG="${GLCONF:-$T_SITE/grantd.conf}" "$GLC/VREF/2fa" refs/heads/master \
		"$(printf '0%.0s' {1..40})" "$(printf '1%.0s' {1..40})" \
		4b825dc642cb6eb9a060e54bf8d69288fbee4904 "$(printf '2%.0s' {1..40})" W "$vref" ${rest[@]+"${rest[@]:1}"}
}

D0=$(t_digest)
t_expect 2 "2fa without GL_USER: exit 2" gl2fa 127.0.7.7 "" val 123456
t_one_line "one line" "$ERR"
t_has "naming GL_USER" "$ERR" "GL_USER is not set"
t_expect 2 "2fa for gitolite user 'Gwen' (not a grantd name): exit 2" gl2fa 127.0.7.7 Gwen enroll totp
t_one_line "one line" "$ERR"
t_has "that says so" "$ERR" "user name 'Gwen' cannot use 2-factor authentication here"
t_expect 0 "2fa with no word: the help" gl2fa 127.0.7.7 gwen
t_has "which lists val" "$OUT" "val TOKEN"
t_has "and names [node] host" "$OUT" "(ssh git.example.org 2fa COMMAND)"
t_expect 2 "2fa --config FILE: a word, never grant-shell's option" gl2fa 127.0.7.7 gwen --config /nonexistent
t_has "an unknown 2fa command" "$ERR" "Unknown 2fa command '--config'"
t_expect 1 "gwen (no record): 2fa val is refused" gl2fa 127.0.7.7 gwen val 123456
t_one_line "one line" "$ERR"
t_has "that says how to enroll" "$ERR" "not enrolled with 2-factor authentication; enroll with: ssh"
t_expect 1 "gwen: 2fa isval: False" gl2fa 127.0.7.7 gwen isval
t_eq "the refusals changed nothing (digest)" "$(t_digest)" "$D0"
t_check "gwen has no user record" eval '! t_has_user paloalto gwen'

t_expect 0 "VREF/2fa/optin: gwen (not enrolled) may push" glvref 127.0.7.7 gwen VREF/2fa/optin
t_eq "silently" "$OUT$ERR" ""
t_expect 1 "VREF/2fa: gwen (not enrolled) may not" glvref 127.0.7.7 gwen VREF/2fa
t_eq "everything on stdout (gitolite prints it before its FATAL)" "$ERR" ""
t_eq "the reason, then the VREF line with the fix" "$OUT" \
	"user 'gwen' is not enrolled with 2-factor authentication, which 'demo' requires
VREF/2fa: enroll first: ssh $H 2fa enroll totp (or yubikey), then ssh $H 2fa val <token>"

t_expect 0 "gwen: 2fa enroll totp makes her user record" gl2fa 127.0.7.7 gwen enroll totp
t_check "gwen is in the user list" t_has_user paloalto gwen
GS=$(grep -oE 'Secret \(base32\): [A-Z2-7]+' <<<"$OUT" | sed 's/.*: //')
t_check "the secret is shown" test -n "$GS"
t_has "and the QR code's heading" "$OUT" "Scan this QR code"
t_has "the URI names [node] host as label and issuer" "$OUT" \
	"URI: otpauth://totp/git.example.org:gwen?secret=$GS&issuer=git.example.org&"
t_expect 0 "VREF/2fa/optin: gwen (enrolled, not yet validated) still may push" glvref 127.0.7.8 gwen VREF/2fa/optin
t_totp_settle
t_expect 0 "gwen: 2fa val <totp> from 127.0.7.7" gl2fa 127.0.7.7 gwen val "$(t_totp "$GS")"
t_has "adds 127.0.7.7" "$OUT" "Adding IP address 127.0.7.7"
for v in VREF/2fa VREF/2fa/optin; do
	t_expect 0 "$v: gwen may push from 127.0.7.7" glvref 127.0.7.7 gwen "$v"
	t_eq "silently" "$OUT$ERR" ""
	t_expect 1 "$v: gwen may not push from 127.0.7.8" glvref 127.0.7.8 gwen "$v"
	t_eq "the reason, then the VREF line with grant-shell's hint" "$OUT" \
		"IP address 127.0.7.8 has not been validated for user 'gwen'
$v: get your 2-factor token and run: ssh $H 2fa val <token>"
done
t_expect 1 "VREF/2fa/foo denies" glvref 127.0.7.7 gwen VREF/2fa/foo
t_has "and says so" "$OUT" "VREF/2fa/foo: unknown 2-factor VREF"
t_expect 0 "VREF/2fa/optin: gitolite user 'Gwen' (cannot enroll) may push" glvref 127.0.7.7 Gwen VREF/2fa/optin
t_expect 1 "VREF/2fa: 'Gwen' may not" glvref 127.0.7.7 Gwen VREF/2fa
t_has "and is told why" "$OUT" "user name 'Gwen' cannot use 2-factor authentication here"
t_expect 2 "a VREF with too few arguments denies" env GL_USER=gwen "$GLC/VREF/2fa" refs/heads/master
sed "s|^user_socket = .*|user_socket = $T_DIR/nosuch.sock|" "$T_SITE/grantd.conf" >"$T_DIR/down.conf"
GLCONF=$T_DIR/down.conf t_expect 1 "node unreachable: VREF/2fa/optin fails closed" glvref 127.0.7.7 gwen VREF/2fa/optin
t_eq "nothing on stderr" "$ERR" ""
t_has "a server problem" "$OUT" "server problem"
t_has "then the VREF line" "$OUT" "VREF/2fa/optin: 2-factor verification could not be done; try again later"
GLCONF=$T_DIR/down.conf t_expect 3 "node unreachable: 2fa val exits 3" gl2fa 127.0.7.7 gwen val 123456
t_one_line "one line" "$ERR"
t_has "a server problem" "$ERR" "server problem"

t_section "[node] host with the account: hints users can paste, the issuer without it"
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
sed -i "s/^host = .*/host = git@$H/" "$T_SITE/grantd.conf"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts with host = git@$H"
t_expect 1 "VREF/2fa: gwen may not push from 127.0.7.9" glvref 127.0.7.9 gwen VREF/2fa
t_has "the hint names the account" "$OUT" "VREF/2fa: get your 2-factor token and run: ssh git@$H 2fa val <token>"
t_expect 0 "gina: 2fa enroll totp" gl2fa 127.0.7.7 gina enroll totp
t_has "the URI's label and issuer are the name alone" "$OUT" "URI: otpauth://totp/$H:gina?secret="
t_has "the issuer parameter too" "$OUT" "&issuer=$H&"

t_section "secrets stay secret"
t_check "the TOTP secret is not in grantd.log" eval '! grep -qF "$ES" "$T_SITE/grantd.log"'
t_check "the hex key is not in grantd.log" eval '! grep -qiF "$HEX" "$T_SITE/grantd.log"'
t_expect 0 "the TOTP secret is not stored in the clear (raw, base32, hex)" t_no_secret "$T_SITE/data" b32 "$ES"
t_expect 0 "the YubiKey's hex key is not stored in the clear (raw, base32, hex)" t_no_secret "$T_SITE/data" hex "$HEX"
for c in "${SCRATCH[@]}"; do
	t_expect 0 "scratch code $c is not stored in the clear" t_no_secret "$T_SITE/data" code "$c"
done
t_expect 0 "grantctl user list --json" t_ctl user list --json
t_hasnt "user list does not show the secret" "$OUT" "$ES"

t_done
