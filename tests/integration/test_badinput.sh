#!/bin/bash
# Bad input changes nothing (SPEC 2.8): every command given a malformed
# token, IP, duration, prefix, user or repository name exits non-zero with a
# one-line error and leaves the state digest as it was.  Repository paths
# with ".." or outside repo_dir are never served.
. "$(dirname "$0")/lib.sh"

# the raw frames below need it; like test_repl_security and test_git_rogue
# this test skips without it (exit 77), which fails in CI (tests/run)
PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}

t_site_up lockout_failures=64   # a miscounted failure shows in the digest, not as a lockout
t_user alice
AS=$(gd_base32_secret)
t_expect 0 "enroll alice --hotp" t_ctl enroll alice --hotp --secret "$AS" --digits 6
t_expect 0 "repo add demo --mode required --writer alice" t_ctl repo add demo --mode required --writer alice
t_expect 0 "2fa val <hotp 0> from 127.0.7.7" t_ssh 127.0.7.7 alice 2fa val "$(t_hotp "$AS" 0)"
TOK=$(t_hotp "$AS" 1)   # a good, unused token: refused commands must not burn it
git init -q --bare "$T_DIR/outside.git"
git --git-dir="$T_DIR/outside.git" config receive.denyCurrentBranch ignore
# not empty: a served outside.git would show this commit and its branch
OUT_TREE=$(git --git-dir="$T_DIR/outside.git" hash-object -w -t tree /dev/null)
OUT_OID=$(git --git-dir="$T_DIR/outside.git" -c user.name=t -c user.email=t@e commit-tree "$OUT_TREE" -m outside)
git --git-dir="$T_DIR/outside.git" update-ref refs/heads/main "$OUT_OID" || t_fatal "a commit in outside.git"

# bad CODE DESC CMD...: CMD exits CODE with a one-line error and the digest
# does not move.  bad_usage: the same, but a usage text may take more lines.
bad() {
	local code=$1 desc=$2 d0 d1; shift 2
	d0=$(t_digest)
	t_expect "$code" "$desc: exits $code" "$@"
	[[ ${T_MULTI:-0} == 1 ]] || t_one_line "$desc: one-line error" "$ERR"
	d1=$(t_digest)
	t_eq "$desc: state unchanged" "$d1" "$d0"
}
bad_usage() { T_MULTI=1 bad "$@"; }
t_check "status --json gives a digest" test -n "$(t_digest)"

t_section "grant-shell: tokens"
bad 2 "2fa val abcdef" t_ssh 127.0.7.8 alice 2fa val abcdef
bad 2 "2fa val 12ab56" t_ssh 127.0.7.8 alice 2fa val 12ab56
bad 2 "2fa val 1234567890123" t_ssh 127.0.7.8 alice 2fa val 1234567890123
bad_usage 2 "2fa val without a token" t_ssh 127.0.7.8 alice 2fa val
bad 2 "2fa val TOKEN extra" t_ssh 127.0.7.8 alice 2fa val "$TOK" extra

t_section "grant-shell: durations and prefixes"
bad 2 "2fa val-for-days 0" t_ssh 127.0.7.8 alice 2fa val-for-days 0 "$TOK"
bad 2 "2fa val-for-days 31" t_ssh 127.0.7.8 alice 2fa val-for-days 31 "$TOK"
bad 2 "2fa val-for-days -1" t_ssh 127.0.7.8 alice 2fa val-for-days -1 "$TOK"
bad 2 "2fa val-for-days abc" t_ssh 127.0.7.8 alice 2fa val-for-days abc "$TOK"
bad_usage 2 "2fa val-for-days 7 without a token" t_ssh 127.0.7.8 alice 2fa val-for-days 7
bad 2 "2fa val-subnet /8 (wider than /12)" t_ssh 127.0.7.8 alice 2fa val-subnet /8 "$TOK"
bad 2 "2fa val-subnet /0" t_ssh 127.0.7.8 alice 2fa val-subnet /0 "$TOK"
bad 2 "2fa val-subnet /33" t_ssh 127.0.7.8 alice 2fa val-subnet /33 "$TOK"
bad 2 "2fa val-subnet /2x" t_ssh 127.0.7.8 alice 2fa val-subnet /2x "$TOK"

t_section "grant-shell: addresses and commands"
bad 2 "2fa inval 300.1.2.3" t_ssh 127.0.7.7 alice 2fa inval 300.1.2.3
bad 2 "2fa inval notanip" t_ssh 127.0.7.7 alice 2fa inval notanip
bad 2 "2fa inval 10.0.0.0/99" t_ssh 127.0.7.7 alice 2fa inval 10.0.0.0/99
bad 2 "2fa list-val bogus" t_ssh 127.0.7.7 alice 2fa list-val bogus
bad 2 "2fa enroll bogus" t_ssh 127.0.7.7 alice 2fa enroll bogus
bad 2 "2fa frobnicate" t_ssh 127.0.7.7 alice 2fa frobnicate
bad 2 "a shell command (rm -rf /tmp/x)" t_ssh 127.0.7.7 alice rm -rf /tmp/x
bad_usage any "no command at all (a greeting or a usage, nothing else)" t_ssh 127.0.7.7 alice

t_section "grant-shell: repository paths"
bad 2 "git-receive-pack '../x'" t_ssh 127.0.7.7 alice "git-receive-pack '../x'"
bad 2 "git-receive-pack 'demo/../../x'" t_ssh 127.0.7.7 alice "git-receive-pack 'demo/../../x'"
bad 2 "git-receive-pack '.hidden'" t_ssh 127.0.7.7 alice "git-receive-pack '.hidden'"
bad 2 "git-receive-pack 'a//b'" t_ssh 127.0.7.7 alice "git-receive-pack 'a//b'"
bad 2 "git-receive-pack 'demo.git/x' (inside demo's git dir)" t_ssh 127.0.7.7 alice "git-receive-pack 'demo.git/x'"
bad 2 "git-upload-pack '../x'" t_ssh 127.0.7.7 alice "git-upload-pack '../x'"
# git itself exits 128 at the end of its input, so the exit code alone
# cannot tell; what was printed can: outside.git's commit and branch
bad nz "git-receive-pack of an absolute path outside repo_dir" \
	t_ssh 127.0.7.7 alice "git-receive-pack '$T_DIR/outside.git'"
t_hasnt "no ref advertisement from outside.git (its commit)" "$OUT" "$OUT_OID"
t_hasnt "no ref advertisement from outside.git (its branch)" "$OUT" "refs/heads/main"
bad nz "git-upload-pack of an absolute path outside repo_dir" \
	t_ssh 127.0.7.7 alice "git-upload-pack '$T_DIR/outside.git'"
t_hasnt "no ref advertisement from outside.git (its commit)" "$OUT" "$OUT_OID"
t_hasnt "no ref advertisement from outside.git (its branch)" "$OUT" "refs/heads/main"
t_commit_dir=$T_DIR/w
git init -q -b main "$t_commit_dir" && t_commit "$t_commit_dir"
t_expect nz "git push to ssh://.../../outside.git refused" \
	t_git 127.0.7.7 alice -C "$t_commit_dir" push -q "ssh://root@$T_ADDR:$T_SSH_PORT/../outside.git" HEAD:refs/heads/main
t_expect nz "git push to ssh://...//abs/outside.git refused" \
	t_git 127.0.7.7 alice -C "$t_commit_dir" push -q "ssh://root@$T_ADDR:$T_SSH_PORT/$T_DIR/outside.git" HEAD:refs/heads/main
t_eq "outside.git got nothing (its main is still its own commit)" \
	"$(git --git-dir="$T_DIR/outside.git" rev-parse -q --verify refs/heads/main)" "$OUT_OID"

t_section "grant-shell run by hand"
bad_usage any "grant-shell without SSH_ORIGINAL_COMMAND" \
	env -u SSH_ORIGINAL_COMMAND SSH_CONNECTION="127.0.7.7 1 127.0.0.1 22" \
	"$GD_BIN/grant-shell" --config "$T_SITE/grantd.conf" alice
bad_usage 2 "grant-shell 'B@d' (bad user name)" \
	env SSH_ORIGINAL_COMMAND="2fa isval" SSH_CONNECTION="127.0.7.7 1 127.0.0.1 22" \
	"$GD_BIN/grant-shell" --config "$T_SITE/grantd.conf" 'B@d'
t_has "grant-shell 'B@d': the error names the bad user name" "$(head -1 <<<"$ERR")" "B@d"

t_section "grantctl"
long=$(printf 'a%.0s' {1..70})
printf 'not a key\n' >"$T_DIR/garbage.pub"
bad 2 "user add 'Bad Name'" t_ctl user add 'Bad Name'
bad 2 "user add Alice (upper case)" t_ctl user add Alice
bad 2 "user add a 70-character name" t_ctl user add "$long"
bad nz "user add zed --key /nonexistent" t_ctl user add zed --key /nonexistent
bad 2 "user add zed --key (not a public key)" t_ctl user add zed --key "$T_DIR/garbage.pub"
bad 2 "user del 'B@d'" t_ctl user del 'B@d'
bad 2 "enroll alice --totp --secret 'not base32!'" t_ctl enroll alice --totp --secret 'not base32!'
bad 2 "enroll alice --hotp --digits 7" t_ctl enroll alice --hotp --digits 7 --secret "$AS"
bad 2 "enroll alice --hotp --counter -1" t_ctl enroll alice --hotp --counter -1 --secret "$AS"
bad 2 "enroll alice --totp --period 0" t_ctl enroll alice --totp --period 0 --secret "$AS"
bad 2 "enroll alice (neither --totp nor --hotp)" t_ctl enroll alice --secret "$AS"
bad nz "enroll nosuchuser --totp" t_ctl enroll nosuchuser --totp --secret "$AS"
bad 2 "repo add '../x'" t_ctl repo add ../x
bad 2 "repo add 'a//b'" t_ctl repo add a//b
bad 2 "repo add '.x'" t_ctl repo add .x
bad 2 "repo add 'demo.git/refs/heads/x' (inside demo's git dir)" t_ctl repo add demo.git/refs/heads/x
t_has "... and the error names the nested part" "$ERR" "demo.git/refs/heads/x"
bad 2 "repo add ok --mode bogus" t_ctl repo add ok --mode bogus
bad 2 "repo add ok --writer 'B@d'" t_ctl repo add ok --writer 'B@d'
bad 2 "repo mode demo bogus" t_ctl repo mode demo bogus
bad nz "repo mode nosuch off" t_ctl repo mode nosuch off
bad 2 "repo writers demo 'B@d'" t_ctl repo writers demo 'B@d'
bad 2 "grant revoke alice 300.1.1.1" t_ctl grant revoke alice 300.1.1.1
bad 2 "grant revoke 'B@d' all" t_ctl grant revoke 'B@d' all
bad 2 "grant list --user 'B@d'" t_ctl grant list --user 'B@d'
bad 2 "check alice 1.2.3 demo" t_ctl check alice 1.2.3 demo
bad 2 "check alice 10.0.0.0/99 demo" t_ctl check alice 10.0.0.0/99 demo
bad 2 "check 'B@d' 127.0.7.7 demo" t_ctl check 'B@d' 127.0.7.7 demo
bad 2 "check alice 127.0.7.7 (missing REPO)" t_ctl check alice 127.0.7.7
bad 2 "grantctl frobnicate" t_ctl frobnicate
bad_usage 2 "grantctl with no command" t_ctl
bad_usage 2 "grantctl --bogus-option status" "$GD_BIN/grantctl" --bogus-option status
t_has "grantctl --bogus-option: the first line names the option" "$(head -1 <<<"$ERR")" "--bogus-option"
t_check "no repository was created by the refused repo adds" \
	eval '[[ $(cd "$T_SITE/repos" && find . -maxdepth 2 -name HEAD | sort) == "./demo.git/HEAD" ]]'

t_section "raw frames on the sockets"
# a request over the size limit, and one that does not decode: each gets
# an answer with status 2, and the node keeps serving (SPEC 2.8)
raw_request() { # SOCKET BYTES: send BYTES bytes (x01 + garbage), print the reply status
	"$PY" - "$1" "$2" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["GD_SRC"], "tests", "lib"))
from pbwire import field_bytes, field_varint  # noqa: E402
import ctlwire  # noqa: E402
n = int(sys.argv[2])
if n > 100:
    frame = field_varint(1, 1) + field_bytes(2, "status") + field_bytes(3, "x" * n)
else:
    frame = b"\xff\xff\xff garbage"
print(ctlwire.status(ctlwire.call(sys.argv[1], frame)))
PY
}
export GD_SRC=${GD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
d=$(t_digest)
t_eq "a 100 KB request on the admin socket is answered with status 2" \
	"$(raw_request "$T_SITE/run/admin.sock" 100000)" 2
t_eq "an undecodable frame on the user socket is answered with status 2" \
	"$(raw_request "$T_SITE/run/user.sock" 10)" 2
t_expect 0 "the node still answers status" t_ctl status
t_eq "digest unchanged" "$(t_digest)" "$d"

t_section "--help"
for p in grantd grantctl grant-shell grant-keys grant-hook; do
	t_expect 0 "$p --help exits 0" "$GD_BIN/$p" --help
	t_check "$p --help prints a usage" test -n "$OUT$ERR"
done

t_section "the token used in refused commands is still good"
t_expect 0 "2fa val-for-days 7 <hotp 1> from 127.0.7.8" t_ssh 127.0.7.8 alice 2fa val-for-days 7 "$TOK"
t_expect 0 "127.0.7.8 is whitelisted" t_ssh 127.0.7.8 alice 2fa isval

t_done
