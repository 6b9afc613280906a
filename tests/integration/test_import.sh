#!/bin/bash
# Migration from gitolite and kernel.org's 2fa (issue 22, SPEC 10;
# docs/migrating.md): `grantctl import gitolite-2fa DIR` on a directory
# written here in totp-cgi's own format (secrets/USER.totp as
# google-authenticator writes it, state/USER.json, validations/USER.js),
# and `grantctl import gitolite-keydir DIR`.  Three sites: what one site
# imports is a user, an enrollment, dead tokens and grants everywhere.
. "$(dirname "$0")/lib.sh"

t_cluster_up lockout_failures=50

b32_80() { python3 -c 'import base64,os;print(base64.b32encode(os.urandom(10)).decode())'; }
iso() { date -u -d "@$1" '+%Y-%m-%d %H:%M:%S+00:00'; }

t_section "a totp-cgi 2fa directory"
D=$T_DIR/2fa
mkdir -p "$D/secrets" "$D/state" "$D/validations"
t_totp_settle
NOW=$(date +%s)
AS=$(b32_80) BS=$(b32_80) CS=$(b32_80)
# alice: TOTP (80-bit, as totp-cgi made), the current step used, a live
# validation, an expired one, a val-session one
printf '%s\n" RATE_LIMIT 3 30\n" WINDOW_SIZE 17\n" DISALLOW_REUSE\n" TOTP_AUTH\n%s' \
	"$AS" $'11111111\n22222222\n33333333\n44444444\n55555555' >"$D/secrets/alice.totp"
cat >"$D/state/alice.json" <<EOF
{
    "fail_timestamps": [],
    "success_timestamps": [$((NOW - 40)), $NOW],
    "used_scratch_tokens": [],
    "counter": -1
}
EOF
ALICE_EXP=$((NOW + 86400))
printf '{"127.0.7.7": {"added": "%s", "expires": "%s", "geoip": "Somewhere"}, "127.0.8.0/24": {"added": "%s", "expires": "%s"}, "127.0.7.9": {"added": "%s", "expires": "%s", "sessionid": "5"}}' \
	"$(iso "$NOW")" "$(iso "$ALICE_EXP")" "$(iso $((NOW - 90000)))" "$(iso $((NOW - 3600)))" \
	"$(iso "$NOW")" "$(iso $((NOW + 28800)))" >"$D/validations/alice.js"
# bob: HOTP (a YubiKey), 160 bits, the file's counter 0, the state's 5
BS=$(python3 -c 'import base64,os;print(base64.b32encode(os.urandom(20)).decode())')
printf '%s\n" RATE_LIMIT 3 30\n" WINDOW_SIZE 30\n" HOTP_COUNTER 0\n%s' \
	"$BS" $'61111111\n62222222\n63333333\n64444444\n65555555' >"$D/secrets/bob.totp"
echo '{"fail_timestamps": [], "success_timestamps": [], "used_scratch_tokens": [], "counter": 5}' \
	>"$D/state/bob.json"
# carol: TOTP, two scratch codes spent (one a string, one a number as an
# older totp-cgi stored them), no validations file
printf '%s\n" RATE_LIMIT 3 30\n" WINDOW_SIZE 17\n" DISALLOW_REUSE\n" TOTP_AUTH\n%s\n' \
	"$CS" $'71111111\n72222222\n73333333\n74444444\n75555555' >"$D/secrets/carol.totp"
echo '{"fail_timestamps": [], "success_timestamps": [], "used_scratch_tokens": ["71111111", 72222222]}' \
	>"$D/state/carol.json"
# dave: a secrets file that cannot be read (even by root: a directory);
# erin: a state file that does not parse
mkdir "$D/secrets/dave.totp"
printf '%s\n" TOTP_AUTH\n' "$(b32_80)" >"$D/secrets/erin.totp"
echo '{"success_timestamps": [1, 2' >"$D/state/erin.json"

t_expect 0 "repo add r --mode required --writer alice --writer bob --writer carol" \
	t_c paloalto repo add r --mode required --writer alice --writer bob --writer carol
t_expect_converged "the sites agree before the import" 10
D0=$(t_sdigest paloalto)

t_section "--dry-run says what it would do and changes nothing"
t_expect 5 "import gitolite-2fa --dry-run: exit 5 (something skipped)" \
	t_c paloalto import gitolite-2fa --dry-run "$D"
t_has "... would add alice" "$OUT" "user alice: would add"
t_has "... alice's enrollment, an 80-bit TOTP secret" "$OUT" "enrollment would add (totp, 80-bit"
t_hasnt "... never the secret" "$OUT$ERR" "$AS"
t_hasnt "... nor a scratch code" "$OUT$ERR" "22222222"
t_eq "the digest is unchanged" "$(t_sdigest paloalto)" "$D0"
t_expect 1 "alice does not exist" t_has_user paloalto alice

t_section "the import"
t_expect 5 "import gitolite-2fa: exit 5 (something skipped)" t_c paloalto import gitolite-2fa "$D"
t_has "the unreadable secrets/dave.totp is named" "$ERR" "secrets/dave.totp"
t_has "the unparsable state/erin.json is named" "$ERR" "state/erin.json"
t_has "the expired validation is left out" "$OUT" "127.0.8.0/24 expired"
t_has "the val-session validation is named, not carried over" "$OUT" "val-session grant 127.0.7.9 not carried over"
t_hasnt "never the secret" "$OUT$ERR" "$AS"
for s in paloalto portland montreal; do
	for u in alice bob carol; do
		t_expect_soon 0 10 "$s: has user $u" t_has_user "$s" "$u"
	done
	t_expect 1 "$s: has no user dave" t_has_user "$s" dave
	t_expect 1 "$s: has no user erin" t_has_user "$s" erin
done
t_expect_converged "the three sites agree after the import" 10

t_section "the grant is live at every site, with its expiry"
for s in portland montreal; do
	t_expect 0 "$s: check alice 127.0.7.7 r allowed" t_c "$s" check alice 127.0.7.7 r
	t_expect 1 "$s: check alice 127.0.8.1 r refused (expired validation)" t_c "$s" check alice 127.0.8.1 r
	t_expect 1 "$s: check alice 127.0.7.9 r refused (session validation)" t_c "$s" check alice 127.0.7.9 r
	t_expect 0 "$s: grant list --user alice --json" t_c "$s" grant list --user alice --json
	t_has "$s: the grant expires when totp-cgi said" "$OUT" \
		"\"expires\":\"$(date -u -d "@$ALICE_EXP" '+%Y-%m-%d %H:%M:%S UTC')\""
done

t_section "a second import changes nothing"
D1=$(t_sdigest paloalto)
t_expect 5 "import gitolite-2fa again: exit 5 (the same files skipped)" t_c paloalto import gitolite-2fa "$D"
t_hasnt "... nothing added" "$OUT" ": added"
t_has "... alice's enrollment exists" "$OUT" "user alice: enrollment exists"
t_expect_converged "the sites agree" 10
t_eq "the digest is unchanged" "$(t_sdigest paloalto)" "$D1"
t_expect 5 "montreal: import gitolite-2fa --dry-run there finds it all there" \
	t_c montreal import gitolite-2fa --dry-run "$D"
t_hasnt "... montreal would add nothing" "$OUT" "would add"

t_section "tokens already used stay used; the next ones work"
# alice's step at NOW was used at totp-cgi; the next step's token is good
t_expect 1 "portland: alice's used TOTP token refused" \
	t_sh portland 127.0.7.20 alice 2fa val "$(t_totp "$AS" "$NOW")"
t_expect 0 "portland: alice's next TOTP token accepted" \
	t_sh portland 127.0.7.20 alice 2fa val "$(t_totp "$AS" $((NOW + 30)))"
t_expect 1 "montreal: bob's HOTP 4 (below the counter) refused" \
	t_sh montreal 127.0.7.21 bob 2fa val "$(t_hotp "$BS" 4)"
t_expect 0 "montreal: bob's HOTP 5 accepted" \
	t_sh montreal 127.0.7.21 bob 2fa val "$(t_hotp "$BS" 5)"
t_expect 1 "paloalto: carol's spent scratch code (a string) refused" \
	t_sh paloalto 127.0.7.22 carol 2fa val 71111111
t_expect 1 "paloalto: carol's spent scratch code (a number) refused" \
	t_sh paloalto 127.0.7.22 carol 2fa val 72222222
t_expect 0 "portland: carol's unspent scratch code accepted" \
	t_sh portland 127.0.7.22 carol 2fa val 73333333
t_expect 0 "portland: alice's unspent scratch code accepted" \
	t_sh portland 127.0.7.23 alice 2fa val 22222222
t_expect_converged "the uses reach every site" 10
t_expect 1 "montreal: carol's scratch code used at portland refused" \
	t_sh montreal 127.0.7.24 carol 2fa val 73333333

t_section "a gitolite keydir"
K=$T_DIR/keydir
mkdir -p "$K/people/laptops"
for k in a1 a2 f1 x1 x2; do gd_user_key "$T_KEYS/$k" || t_fatal "ssh-keygen $k"; done
cp "$T_KEYS/a1.pub" "$K/alice.pub"
cp "$T_KEYS/a2.pub" "$K/people/laptops/alice@laptop.pub"
cp "$T_KEYS/f1.pub" "$K/people/frank.pub"
cp "$T_KEYS/a1.pub" "$K/grace.pub"                      # alice's key
cat "$T_KEYS/x1.pub" "$T_KEYS/x2.pub" >"$K/henry.pub"   # two keys
D2=$(t_sdigest paloalto)
t_expect 5 "import gitolite-keydir --dry-run: exit 5" t_c paloalto import gitolite-keydir --dry-run "$K"
t_eq "... the digest is unchanged" "$(t_sdigest paloalto)" "$D2"
t_expect 5 "import gitolite-keydir: exit 5 (grace and henry.pub skipped)" \
	t_c paloalto import gitolite-keydir "$K"
t_has "grace refused: her key is alice's (named)" "$ERR" "already held by user 'alice'"
t_has "henry.pub named: two keys in one file" "$ERR" "henry.pub: more than one key"
FP1=$(ssh-keygen -lf "$T_KEYS/a1.pub" | cut -d' ' -f2)
FP2=$(ssh-keygen -lf "$T_KEYS/a2.pub" | cut -d' ' -f2)
for s in portland montreal; do
	t_expect_soon 0 10 "$s: has user frank" t_has_user "$s" frank
	t_expect 1 "$s: has no user grace" t_has_user "$s" grace
done
t_expect_converged "the sites agree after the keydir import" 10
t_expect 0 "montreal: user keys alice" t_c montreal user keys alice
t_has "... alice.pub's key, by fingerprint" "$OUT" "$FP1"
t_has "... alice@laptop.pub's key" "$OUT" "$FP2"
D3=$(t_sdigest paloalto)
t_expect 5 "import gitolite-keydir again" t_c paloalto import gitolite-keydir "$K"
t_eq "... changes nothing (digest)" "$(t_sdigest paloalto)" "$D3"

t_section "user keys, user key-del, a .pub file with two keys"
t_expect 0 "user key-del alice <alice@laptop's fingerprint>" t_c portland user key-del alice "$FP2"
t_expect 0 "user keys alice --json" t_c portland user keys alice --json
t_has "... alice.pub's key is left" "$OUT" "$FP1"
t_hasnt "... the laptop's is gone" "$OUT" "$FP2"
t_expect 1 "user key-del alice <that key again>: refused" t_c portland user key-del alice "$FP2"
t_expect 0 "user add henry --key henry.pub (two keys)" t_c paloalto user add henry --key "$K/henry.pub"
t_has "... both keys are added" "$OUT" "(2 keys)"
t_expect 0 "user keys henry" t_c paloalto user keys henry
t_has "... the first" "$OUT" "$(ssh-keygen -lf "$T_KEYS/x1.pub" | cut -d' ' -f2)"
t_has "... and the second" "$OUT" "$(ssh-keygen -lf "$T_KEYS/x2.pub" | cut -d' ' -f2)"
printf '%s\nnot a key\n' "$(<"$T_KEYS/f1.pub")" >"$T_DIR/bad.pub"
t_expect 2 "user add ivan --key FILE with a bad second line: refused whole" \
	t_c paloalto user add ivan --key "$T_DIR/bad.pub"
t_expect 1 "... ivan does not exist" t_has_user paloalto ivan

t_done
