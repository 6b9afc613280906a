#!/bin/bash
# SSH security keys (FIDO2) as two factors (issue 11), through the real
# ssh, sshd, grant-keys, grant-shell and git, with a software
# authenticator written for the tests (tests/skprovider/, loaded by
# ssh-keygen and ssh-sk-helper as a SecurityKeyProvider; never
# installed).  [policy] security_keys = touch (the default): a push over an
# ed25519-sk key is allowed with no enrollment and no grant, for required
# and opt-in repositories; the same user's ordinary key from the same
# address still needs a grant; a signature that reports no touch is
# refused by sshd.  pin: grant-keys adds verify-required, so sshd refuses
# a key used without its PIN and a push with the PIN (asked through
# SSH_ASKPASS) is allowed.  off: the security key is an ordinary key.  2fa
# isval and the refusals say which factors were seen.
. "$(dirname "$0")/lib.sh"

PROV=$GD_BIN/gd-sk-provider.so
if [[ ! -f $PROV ]]; then
	echo "skip: no $PROV (build the gd-sk-provider target)"
	exit 77
fi

t_site_up
# the provider's log, and the PIN its verify-required keys want (ssh asks
# for it through SSH_ASKPASS: no terminal here)
export GD_SK_LOG=$T_DIR/sk.log GD_SK_PIN=2468
printf '#!/bin/sh\necho 2468\n' >"$T_DIR/askpass"
chmod 755 "$T_DIR/askpass"
export SSH_ASKPASS=$T_DIR/askpass SSH_ASKPASS_REQUIRE=force
SSHD_LOG=$T_SITE/sshd.log

# sk_keygen FILE [OPTION...]: an ed25519-sk key made by the test provider.
sk_keygen() {
	local f=$1; shift
	ssh-keygen -q -t ed25519-sk -w "$PROV" -N '' -C "$(basename "$f")" \
		-f "$f" "$@" </dev/null
}
# fp FILE.pub: its SHA256 fingerprint, as sshd gives grant-keys (%f).
fp() { ssh-keygen -lf "$1" | cut -d' ' -f2; }
# keys_line KEY: the line grant-keys prints for the key's fingerprint.
keys_line() {
	"$GD_BIN/grant-keys" --config "$T_SITE/grantd.conf" root "$(fp "$T_KEYS/$1.pub")"
}
# sk_git SRCIP KEY GIT-ARGS...: git over ssh with KEY and the provider.
sk_git() {
	local src=$1 key=$2; shift 2
	GIT_SSH_COMMAND="$(gd_git_ssh_command "$src" "$T_KEYS/$key")-o SecurityKeyProvider=$PROV" \
	GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 \
		git "$@" </dev/null
}
# push SRCIP KEY REPO: push the work tree's HEAD to REPO's main.
push() { sk_git "$1" "$2" -C "$T_DIR/w" push -q "$(t_url "$3")" HEAD:refs/heads/main; }
# sk_ssh SRCIP KEY COMMAND...: COMMAND through sshd with KEY and the provider.
sk_ssh() {
	local src=$1 key=$2; shift 2
	# shellcheck disable=SC2046
	ssh $(gd_ssh_opts "$src" "$T_KEYS/$key") -o SecurityKeyProvider="$PROV" \
		-p "$T_SSH_PORT" "root@$T_ADDR" "$@" </dev/null
}
# no_touch CMD...: CMD with the authenticator reporting no touch.
no_touch() { (export GD_SK_NO_TOUCH=1; "$@"); }
# no_uv CMD...: CMD with the authenticator reporting no user verification.
no_uv() { (export GD_SK_NO_UV=1; "$@"); }
# restart_with MODE: the node again, with security_keys = MODE.
restart_with() {
	t_stop paloalto
	t_config security_keys="$1"
	gd_grantd_start "$T_SITE" || t_fatal "grantd starts with security_keys = $1"
}

t_section "sam has an ordinary key and two ed25519-sk keys (one verify-required)"
gd_user_key "$T_KEYS/sam" || t_fatal "ssh-keygen for sam"
t_expect 0 "ssh-keygen -t ed25519-sk -w gd-sk-provider.so" sk_keygen "$T_KEYS/sam.sk"
t_expect 0 "ssh-keygen -t ed25519-sk -O verify-required" sk_keygen "$T_KEYS/sam.skpin" -O verify-required
t_has "the key is an sk-ssh-ed25519 key" "$(cat "$T_KEYS/sam.sk.pub")" "sk-ssh-ed25519@openssh.com "
t_expect 0 "grantctl user add sam --key (ordinary)" t_ctl user add sam --key "$T_KEYS/sam.pub"
t_hasnt "no note for an ordinary key" "$OUT" "note:"
t_expect 0 "grantctl user add sam --key (sk, sk with PIN): added to sam's keys" \
	t_ctl user add sam --key "$T_KEYS/sam.sk.pub" --key "$T_KEYS/sam.skpin.pub"
t_has "grantctl says so" "$OUT" "updated user sam (3 keys)"
# issue 19, N4: what such a key proves is what its authenticator reports
for k in sam.sk sam.skpin; do
	t_has "one line says $k counts as two factors" "$OUT" \
		"note: security key $(fp "$T_KEYS/$k.pub") counts as two factors (security_keys = touch): a push over it needs no token; it proves the touch its authenticator reports, which a software one reports at will"
done
t_eq "one line per security key" "$(grep -c '^note: security key' <<<"$OUT")" 2
t_expect 0 "repo add req --mode required" t_ctl repo add req --mode required --writer sam
t_expect 0 "repo add optin --mode opt-in" t_ctl repo add optin --mode opt-in --writer sam

t_section "grant-keys marks the security keys in the forced command"
t_expect 0 "grant-keys for sam's sk key" keys_line sam.sk
t_has "the sk key's line runs grant-shell --key-kind sk-touch sam" "$OUT" "--key-kind sk-touch sam\","
t_hasnt "no verify-required with touch" "$OUT" "verify-required"
t_expect 0 "grant-keys for sam's ordinary key" keys_line sam
t_hasnt "the ordinary key's line has no --key-kind" "$OUT" "--key-kind"

t_section "security_keys = touch (the default)"
t_expect 0 "clone req (reads are never guarded)" t_clone 127.0.7.9 sam req "$T_DIR/w"
t_commit "$T_DIR/w"
t_expect 0 "push to req over the sk key: allowed, no enrollment, no grant" push 127.0.7.7 sam.sk req
t_eq "req's main is the pushed commit" "$(t_ref req)" "$(t_head "$T_DIR/w")"
t_check "the authenticator was asked for a touch and gave it" \
	grep -q "sign asked=0x01 reported=0x01" "$GD_SK_LOG"
t_expect 0 "push to optin over the sk key: allowed" push 127.0.7.7 sam.sk optin
t_eq "optin's main is the pushed commit" "$(t_ref optin)" "$(t_head "$T_DIR/w")"
t_commit "$T_DIR/w"
before=$(t_ref req)
t_expect nz "the ordinary key from the same address: refused (required, not enrolled)" \
	push 127.0.7.7 sam req
t_has "the refusal says which factors were seen" "$ERR" \
	"factors seen: an ordinary SSH key (one factor; a security key, ed25519-sk, would count as two); no 2-factor token enrolled"
t_eq "the refused push moved nothing" "$(t_ref req)" "$before"
t_expect 1 "2fa isval over the sk key: False (no grant)" sk_ssh 127.0.7.7 sam.sk 2fa isval
t_eq "stdout is kernel.org's answer alone" "$OUT" False
t_has "stderr says the security key counts as two factors" "$ERR" \
	"factors seen: a security key with touch (two factors); no 2-factor grant covers this address"
t_expect 1 "2fa isval over the ordinary key" t_ssh 127.0.7.7 sam 2fa isval
t_has "stderr says an ordinary key was seen" "$ERR" "factors seen: an ordinary SSH key"

t_section "no touch: sshd refuses the signature"
: >"$GD_SK_LOG"
t_expect nz "push over the sk key, the authenticator reporting no touch" \
	no_touch push 127.0.7.7 sam.sk req
t_check "the authenticator signed without the touch" grep -q "reported=0x00" "$GD_SK_LOG"
t_expect_soon 0 5 "sshd: user presence (authenticator touch) requirement not met" \
	grep -q "user presence (authenticator touch) requirement not met" "$SSHD_LOG"
t_eq "nothing moved" "$(t_ref req)" "$before"

t_section "an ordinary key needs a grant, the sk key none"
AS=$(gd_base32_secret)
t_expect 0 "grantctl enroll sam --hotp" t_ctl enroll sam --hotp --secret "$AS"
t_expect nz "enrolled, no grant: the ordinary key is refused" push 127.0.7.7 sam req
t_has "the refusal says which factors were seen" "$ERR" \
	"factors seen: an ordinary SSH key (one factor; a security key, ed25519-sk, would count as two); no 2-factor grant covers this address"
t_expect 0 "enrolled, no grant: the sk key is allowed" push 127.0.7.7 sam.sk req
t_commit "$T_DIR/w"
t_expect 0 "sam: 2fa val from 127.0.7.7 (ordinary key)" t_ssh 127.0.7.7 sam 2fa val "$(t_hotp "$AS" 0)"
t_expect 0 "with the grant the ordinary key is allowed from 127.0.7.7" push 127.0.7.7 sam req
t_eq "req's main is the pushed commit" "$(t_ref req)" "$(t_head "$T_DIR/w")"
t_commit "$T_DIR/w"
t_expect nz "the ordinary key from 127.0.7.8 (no grant): refused" push 127.0.7.8 sam req
t_expect 0 "the sk key from 127.0.7.8 (no grant): allowed" push 127.0.7.8 sam.sk req

t_section "security_keys = pin: sshd demands the PIN, the node counts only sk-pin"
restart_with pin
t_expect 0 "grant-keys for sam's sk key" keys_line sam.sk
t_has "the line runs grant-shell --key-kind sk-pin sam" "$OUT" "--key-kind sk-pin sam\","
t_has "the line has verify-required" "$OUT" ",verify-required sk-ssh-ed25519@openssh.com "
t_commit "$T_DIR/w"
before=$(t_ref req)
: >"$GD_SK_LOG"
t_expect nz "push over the sk key made without a PIN: refused" push 127.0.7.8 sam.sk req
t_expect_soon 0 5 "sshd: user verification requirement not met" \
	grep -q "user verification requirement not met" "$SSHD_LOG"
t_expect nz "push over the verify-required key, the authenticator reporting no user verification: refused" \
	no_uv push 127.0.7.8 sam.skpin req
t_check "the authenticator was asked for verification and did not report it" \
	grep -q "sign asked=0x05 reported=0x01" "$GD_SK_LOG"
t_eq "nothing moved" "$(t_ref req)" "$before"
t_expect 0 "push over the verify-required key with its PIN (SSH_ASKPASS): allowed, no grant" \
	push 127.0.7.8 sam.skpin req
t_check "the authenticator asked for the PIN, then reported touch and PIN" \
	eval 'grep -q "PIN required" "$GD_SK_LOG" && grep -q "sign asked=0x05 reported=0x05" "$GD_SK_LOG"'
t_eq "req's main is the pushed commit" "$(t_ref req)" "$(t_head "$T_DIR/w")"
t_expect 1 "2fa isval over the PIN key" sk_ssh 127.0.7.8 sam.skpin 2fa isval
t_has "stderr: touch and PIN, two factors" "$ERR" "factors seen: a security key with touch and PIN (two factors)"

t_section "security_keys = off: a security key is an ordinary key"
restart_with off
t_expect 0 "ssh-keygen -t ed25519-sk (another)" sk_keygen "$T_KEYS/sam.sk2"
t_expect 0 "grantctl user add sam --key (sk) under off" t_ctl user add sam --key "$T_KEYS/sam.sk2.pub"
t_hasnt "no note: it counts as one factor here" "$OUT" "note:"
t_expect 0 "grant-keys for sam's sk key" keys_line sam.sk
t_has "the line still says what the key is" "$OUT" "--key-kind sk-touch sam\","
t_hasnt "no verify-required" "$OUT" "verify-required"
t_commit "$T_DIR/w"
before=$(t_ref req)
t_expect nz "the sk key from 127.0.7.8 (no grant): refused" push 127.0.7.8 sam.sk req
t_has "the refusal says the key counted as an ordinary one" "$ERR" \
	"factors seen: a security key with touch, counted as an ordinary SSH key here (security_keys = off); no 2-factor grant covers this address"
t_has "and how to fix it" "$ERR" "2fa val"
t_eq "nothing moved" "$(t_ref req)" "$before"
t_expect 0 "the sk key from 127.0.7.7 (granted): allowed" push 127.0.7.7 sam.sk req
t_eq "req's main is the pushed commit" "$(t_ref req)" "$(t_head "$T_DIR/w")"

t_section "a key kind no one wrote is refused as bad input"
t_expect 2 "grant-shell --key-kind sk sam" env SSH_CONNECTION="127.0.7.7 40022 $T_ADDR 22" \
	SSH_ORIGINAL_COMMAND="git-receive-pack 'req'" \
	"$GD_BIN/grant-shell" --config "$T_SITE/grantd.conf" --key-kind sk sam
t_has "it names the kinds" "$ERR" "use plain, sk-touch or sk-pin"
if PY=$(t_py); then
	# push.check with key_kind (field 9) "sk", raw on the user socket
	t_expect 0 "a raw push.check with key_kind 'sk'" "$PY" - "$T_SITE/run/user.sock" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["GD_SRC"], "tests", "lib"))
from pbwire import field_bytes, field_varint  # noqa: E402
import ctlwire  # noqa: E402
frame = (field_varint(1, 1) + field_bytes(2, "push.check") +
         field_bytes(3, "req") + field_bytes(4, "sam") +
         field_bytes(5, "127.0.7.7") + field_bytes(9, "sk"))
print(ctlwire.call(sys.argv[1], frame))
PY
	t_has "the node answers status 2 (bad input)" "$OUT" "\\x08\\x02"
	t_has "and names the kinds" "$OUT" "want plain, sk-touch or sk-pin"
else
	t_fail "python3-zmq is needed for the raw push.check with key_kind 'sk'"
fi

t_done
