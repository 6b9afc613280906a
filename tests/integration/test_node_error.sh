#!/bin/bash
# The node failing to decide is never a refusal (SPEC 3; issue 8 item 16).
# A node restarted with another secret_key refuses to start (its sealed
# enrollments do not open).  A store read that fails while it serves (the
# GRANTD_TEST_FAULT_AT=read-enroll test hook) is an internal error: every
# command that needs an enrollment then exits 4 (not 1, "refused"), the node logs the
# cause, nothing changes, and grant-shell says it is a server problem
# without showing the user any internals.  Then a stand-in node (python3)
# that answers every request with status 4, to check grant-keys and
# grant-shell on that answer alone.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "FAIL: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 1
}

t_site_up
t_user kim
KS=$(gd_base32_secret)
t_expect 0 "enroll kim --hotp" t_ctl enroll kim --hotp --secret "$KS" --digits 6
t_expect 0 "repo add ne --mode required --writer kim" t_ctl repo add ne --mode required --writer kim
t_clone 127.0.7.7 kim ne "$T_DIR/w" || t_fatal "clone ne"
t_expect 0 "kim: 2fa val <hotp 0> from 127.0.7.7" t_ssh 127.0.7.7 kim 2fa val "$(t_hotp "$KS" 0)"
t_expect 0 "check kim 127.0.7.7 ne is allowed" t_ctl check kim 127.0.7.7 ne
d1=$(t_digest)

# no_internals DESC TEXT: TEXT shows a user nothing of the node's insides
no_internals() {
	local w
	for w in crypt internal seal "$T_DIR" "cf=" sock; do
		[[ ${2,,} == *"$w"* ]] && { t_fail "$1: '$w' shown to the user" "$2"; return 1; }
	done
	t_ok "$1"
}

t_section "restarted with another secret_key: the node refuses to start"
# The digest is made again from the records at every start, and the
# enrollments are hashed in the clear: a key that does not open them stops
# the node at once, saying why, instead of serving exit 4 for ever.
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
mv "$T_SITE/node.key" "$T_SITE/node.key.good"
"$GD_BIN/grantctl" keygen "$T_SITE/node.key" >/dev/null || t_fatal "grantctl keygen (another key)"
t_start_refused "$T_SITE" "grantd stops by itself"
t_check "and logs why: the store's records do not open with this key" \
	grep -qF "sealed value does not open cf=enroll (wrong key file?)" "$T_SITE/grantd.log"
mv "$T_SITE/node.key.good" "$T_SITE/node.key"

t_section "a store read that fails while the node serves: exit 4, never a refusal"
# GRANTD_TEST_FAULT_AT=read-enroll (node/daemon/crashpoint.h): every read of an
# enrollment fails as a disk error would.
GRANTD_TEST_FAULT_AT=read-enroll gd_grantd_start "$T_SITE" || t_fatal "grantd starts with the fault armed"
t_expect 4 "check kim 127.0.7.7 ne exits 4 (the node failed to decide)" t_ctl check kim 127.0.7.7 ne
t_has "grantctl says the node failed to decide" "$ERR" "failed to decide"
t_has "and where to look" "$ERR" "log"
t_hasnt "and does not call it a refusal" "${OUT,,}${ERR,,}" "not allowed"
t_check "the node logs the cause: the command and the error" \
	grep -qF 'request failed cmd=check socket=admin: i/o error' "$T_SITE/grantd.log"
t_check "and the store's own reason" grep -qF "store read failed cf=enroll: test fault" "$T_SITE/grantd.log"
t_expect 4 "user list exits 4" t_ctl user list
t_has "grantctl says the node failed to decide" "$ERR" "failed to decide"

t_expect 4 "kim: 2fa val <hotp 1> through sshd exits 4" t_ssh 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"
t_has "grant-shell says it is a server problem" "$ERR" "server problem"
t_has "and what to do" "$ERR" "try again later"
no_internals "grant-shell shows no internals" "$ERR"
t_hasnt "and does not call it a bad token" "$ERR" "Failed to validate"
t_check "the node logs the cause: the command, the user and the error" \
	grep -qF 'request failed cmd=2fa.val socket=user user=kim: i/o error' "$T_SITE/grantd.log"
t_expect 4 "kim: git-receive-pack 'ne' through sshd exits 4" t_ssh 127.0.7.7 kim "git-receive-pack 'ne'"
t_has "grant-shell says it is a server problem" "$ERR" "server problem"
no_internals "grant-shell shows no internals" "$ERR"
t_commit "$T_DIR/w"
t_expect 128 "a git push from 127.0.7.7 fails closed (git: remote hung up)" t_push 127.0.7.7 kim "$T_DIR/w"
t_has "git shows the server-problem message" "$ERR" "server problem"
t_check "and moved nothing" eval '[[ -z $(t_ref ne) ]]'

t_section "the fault gone: nothing was changed"
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts without the fault"
t_eq "the digest is the one before" "$(t_digest)" "$d1"
t_expect 0 "check kim 127.0.7.7 ne is allowed again" t_ctl check kim 127.0.7.7 ne
t_expect 0 "kim: <hotp 1>, tried while the node could not decide, is still good" \
	t_ssh 127.0.7.8 kim 2fa val "$(t_hotp "$KS" 1)"

t_section "a batch whose write fails: exit 4, nothing half-applied"
# GRANTD_TEST_FAULT_AT=commit (node/daemon/crashpoint.h): every batch write fails
# as a RocksDB write error would.  The writer drops the batch and what it
# moved in memory; every caller of the batch is told the node failed to
# decide.
d2=$(t_digest)
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
GRANTD_TEST_FAULT_AT=commit gd_grantd_start "$T_SITE" || t_fatal "grantd starts with the fault armed"
t_expect 4 "kim: 2fa val <hotp 2> exits 4 (its batch was not written)" t_ssh 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 2)"
t_has "grant-shell says it is a server problem" "$ERR" "server problem"
no_internals "grant-shell shows no internals" "$ERR"
t_expect 4 "user add lee exits 4" t_ctl user add lee
t_has "grantctl says the node failed to decide" "$ERR" "failed to decide"
t_check "the node logs the cause" grep -qF "store write failed: test fault" "$T_SITE/grantd.log"
t_expect 1 "check kim 127.0.7.9 ne: no grant was made" t_ctl check kim 127.0.7.9 ne
t_expect 0 "the node still answers reads: user list" t_ctl user list
t_hasnt "and lee is not there" "$OUT" "lee"
t_eq "the digest is the one before" "$(t_digest)" "$d2"
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
gd_grantd_start "$T_SITE" || t_fatal "grantd starts without the fault"
t_eq "after a restart too" "$(t_digest)" "$d2"
t_expect 0 "kim: <hotp 2>, tried while writes failed, is still good" \
	t_ssh 127.0.7.9 kim 2fa val "$(t_hotp "$KS" 2)"

t_section "a node that answers every request with status 4"
gd_sshd_stop "$T_SITE"
gd_grantd_stop "$T_SITE" || t_fatal "grantd stops"
# Reply{status = 4, err = "..."} by hand: field 1 varint, field 3 string
"$PY" - "$T_SITE/run/user.sock" "$T_SITE/run/admin.sock" "$T_DIR/fake.ready" <<'EOF' &
import os, selectors, socket, struct, sys
err = b"internal error: cryptographic failure in cf=enroll at /secret/path"
reply = b"\x08\x04\x1a" + bytes([len(err)]) + err
sel = selectors.DefaultSelector()
for path in sys.argv[1:3]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    s.bind(path)
    s.listen(16)
    sel.register(s, selectors.EVENT_READ, None)
open(sys.argv[3], "w").close()
# the node's framing (node/requests/usersock.h): a 4-byte length, then
# the message; one answer per request read
bufs = {}
while True:
    for key, _ in sel.select():
        s = key.fileobj
        if key.data is None:
            c, _ = s.accept()
            bufs[c] = b""
            sel.register(c, selectors.EVENT_READ, True)
            continue
        d = s.recv(65536)
        if not d:
            sel.unregister(s)
            s.close()
            del bufs[s]
            continue
        bufs[s] += d
        while len(bufs[s]) >= 4:
            n = struct.unpack(">I", bufs[s][:4])[0]
            if len(bufs[s]) < 4 + n:
                break
            bufs[s] = bufs[s][4 + n:]
            s.sendall(struct.pack(">I", len(reply)) + reply)
EOF
FAKE=$!
trap 'kill "$FAKE" 2>/dev/null; t_cleanup' EXIT
gd_wait_for 10 test -e "$T_DIR/fake.ready" || t_fatal "the stand-in node listens"
as_sshd() { # SRCIP COMMAND...: grant-shell for kim as sshd runs it
	local src=$1; shift
	SSH_CONNECTION="$src 40022 $T_ADDR 22" SSH_ORIGINAL_COMMAND="$*" \
		"$GD_BIN/grant-shell" --config "$T_SITE/grantd.conf" kim </dev/null
}
t_expect 4 "grant-keys exits 4" "$GD_BIN/grant-keys" --config "$T_SITE/grantd.conf" root
t_eq "and prints no key line (sshd lets no one in)" "$OUT" ""
t_has "it says it is a server problem" "$ERR" "server problem"
t_hasnt "without the node's internals" "$ERR" "/secret/path"
t_expect 4 "grant-shell 2fa val exits 4" as_sshd 127.0.7.7 2fa val 123456
t_has "it says it is a server problem" "$ERR" "server problem"
no_internals "grant-shell shows no internals" "$ERR$OUT"
t_expect 4 "grant-shell 2fa isval exits 4 (not False)" as_sshd 127.0.7.7 2fa isval
t_hasnt "and does not print False" "$OUT" "False"
t_expect 4 "grant-shell git-receive-pack exits 4" as_sshd 127.0.7.7 "git-receive-pack 'ne'"
t_has "it says it is a server problem" "$ERR" "server problem"
no_internals "grant-shell shows no internals" "$ERR$OUT"
t_expect 4 "grantctl status exits 4" t_ctl status
t_has "grantctl shows the operator the node's answer" "$ERR" "internal error"
kill "$FAKE"
wait "$FAKE" 2>/dev/null
t_done
