# tests/integration/rotation_lib.sh: what the key rotation tests share
# (test_key_rotation.sh: the peers restarted; test_key_reload.sh: the
# peers reloaded with SIGHUP).  Sourced after lib.sh and t_cluster_up.
#
# rotation_setup: users tina (TOTP, secret $TS) and hugo (HOTP, $HS) and
# repository r (mode off) made at paloalto, and the sites converged; $PA is
# paloalto's directory, $OLD its public key.

rotation_setup() {
	PA=$(t_dir paloalto)
	OLD=$(<"$PA/node.pub")
	t_suser paloalto tina
	TS=$(gd_base32_secret)
	t_expect 0 "paloalto: enroll tina --totp" t_c paloalto enroll tina --totp --secret "$TS"
	t_suser paloalto hugo
	HS=$(gd_base32_secret)
	t_expect 0 "paloalto: enroll hugo --hotp" t_c paloalto enroll hugo --hotp --secret "$HS"
	t_expect 0 "paloalto: repo add r" t_c paloalto repo add r --mode off
	t_expect_converged "the three sites agree" 10
}

# ref_is SITE TIP: r's master at SITE is TIP
ref_is() {
	[[ $(git --git-dir="$(t_dir "$1")/repos/r.git" rev-parse -q --verify refs/heads/master 2>/dev/null) == "$2" ]]
}
# peer_link SITE PEER WHAT: SITE's status says its link to PEER is WHAT
# (peers[].link: up, key_refused, ...)
peer_link() {
	t_sj "$1" "1/0 if [p for p in j['peers'] if p['site'] == '$2'][0]['link'] != '$3' else 1" >/dev/null 2>&1
}
# hears SITE PEER: SITE heard PEER within the last 1.5 s
hears() {
	t_sj "$1" "1/0 if not [p for p in j['peers'] if p['site'] == '$2'][0]['connected'] else 1" >/dev/null 2>&1
}
# votes SITE: SITE votes on tokens (majority mode, and a voter)
votes() {
	t_sj "$1" "1/0 if not (j['quorum']['mode'] == 'majority' and j['quorum']['voter']) else 1" >/dev/null 2>&1
}
# set_key SITE FROM TO [KEYFILE]: SITE's [peer paloalto] public_key FROM
# becomes TO (a Z85 key has characters sed would take as its own); with
# KEYFILE (the new key pair's file), its verifier_key becomes the new key's
# followed by the old one (docs/operations.md: paloalto's operations signed
# before the rotation stay checkable).
set_key() {
	local vkey=
	if [[ -n ${4:-} ]]; then
		vkey=$(t_c "$1" log key --key-file "$4" --site paloalto) || return 1
	fi
	python3 - "$(t_dir "$1")/grantd.conf" "$2" "$3" "$vkey" <<'PY'
import re, sys
path, old, new, vkey = sys.argv[1:]
text = open(path).read()
assert text.count("public_key = %s\n" % old) == 1
text = text.replace("public_key = %s\n" % old, "public_key = %s\n" % new)
if vkey:
    sec = re.search(r"\[peer paloalto\]\n(?:[^\[]*\n)?verifier_key = (.*)\n", text)
    assert sec, "no verifier_key in [peer paloalto]"
    text = text[:sec.start(1)] + vkey + " " + sec.group(1) + text[sec.end(1):]
open(path, "w").write(text)
PY
}
