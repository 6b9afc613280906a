#!/bin/bash
# grant-keys as sshd's AuthorizedKeysCommand (SPEC 3.4) and the user store:
# every active user's keys become forced-command lines; a key not in the
# store, or of a deleted user, does not get in; admin enroll/unenroll.
# sshd here passes the offered key's fingerprint (%u %f): grant-keys then
# prints the one line of that key, from the node's fingerprint index, which
# a store made before the index gets at its next start.  A key another
# live user holds is refused by user add.
# grant-keys with a fingerprint asks the node's keys socket (a plain unix
# socket, node/requests/keysock.h) and links no ZeroMQ; the socket's untrusted input
# (malformed and too-long lines, a client that never sends) stalls nothing.
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
t_has "it passes the fingerprint on (the push log's key)" "$OUT" "grant-shell --key-fp $(fp "$T_KEYS/leo.pub") --config"
t_eq "else the line keys.list gives for leo's key" "${OUT/ --key-fp $(fp "$T_KEYS/leo.pub")/}" "$(grep -F "$(cut -d' ' -f2 "$T_KEYS/leo.pub")" <<<"$KEYS")"
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

t_section "the keys socket (grant-keys FINGERPRINT without ZeroMQ)"
KS=$T_SITE/run/keys.sock
t_check "keys.sock beside the user socket (the default)" test -S "$KS"
t_eq "mode 660, as the user socket" "$(stat -c %a "$KS")" "$(stat -c %a "$T_SITE/run/user.sock")"
t_check "grant-keys links no libzmq" eval '! ldd "$GD_BIN/grant-keys" 2>&1 | grep -q libzmq'
t_expect 0 "grant-keys-list root FP(leo) (the old path, keys.find over ZeroMQ)" \
	"$GD_BIN/grant-keys-list" --config "$T_SITE/grantd.conf" root "$(fp "$T_KEYS/leo.pub")"
OLD=$OUT
t_expect 0 "grant-keys root FP(leo)" gk "$(fp "$T_KEYS/leo.pub")"
t_eq "the same line both ways" "$OUT" "$OLD"
# ks_say LINE [HOLD...]: send LINE (printf format) on the keys socket, print
# the answer; with HOLD, also open that many connections that send nothing
ks_say() {
	python3 - "$KS" "$@" <<'PY'
import socket, sys, time
path, line = sys.argv[1], sys.argv[2].encode().decode('unicode_escape').encode('latin-1')
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path)
s.sendall(line); out = b''
while True:
    try:
        b = s.recv(4096)
    except ConnectionResetError:   # closed with our excess unread
        break
    if not b: break
    out += b
sys.stdout.write(out.decode('latin-1'))
PY
}
t_expect 0 "a line that is no fingerprint" ks_say 'nonsense\n'
t_has "answered !2 (keys.find's usage error)" "$OUT" "!2 "
t_expect 0 "a NUL in the line" ks_say 'SHA256:a\x00b\n'
t_eq "answered !2" "$OUT" "!2 a NUL byte in the line"
t_expect 0 "a 300-byte line" ks_say "$(printf 'A%.0s' {1..300})"
t_eq "answered !2 line too long" "$OUT" "!2 line too long"
t_expect 0 "EOF before a newline" ks_say 'SHA256:abc'
t_eq "nothing answered" "$OUT" ""
t_expect 0 "FP(leo) with CRLF" ks_say "$(fp "$T_KEYS/leo.pub")\\r\\n"
t_has "leo and his key" "$OUT" "leo	$(cut -d' ' -f1,2 "$T_KEYS/leo.pub")"
# clients that connect and never send: every lookup meanwhile is answered
# at once, and the node closes them at their deadline (2 s)
python3 - "$KS" <<'PY' &
import socket, sys, time
socks = []
for _ in range(8):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); socks.append(s)
ok = 0
for s in socks:
    s.settimeout(6)
    try:
        ok += s.recv(1) == b''
    except OSError:
        pass
sys.exit(0 if ok == len(socks) else 1)
PY
SLOW=$!
sleep 0.3
t_expect 0 "20 lookups beside 8 silent clients" python3 - "$KS" "$(fp "$T_KEYS/leo.pub")" <<'PY'
import socket, sys, time
t0, n = time.monotonic(), 0
for _ in range(20):
    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode() + b'\n'); out = b''
    while True:
        b = s.recv(4096)
        if not b: break
        out += b
    n += out.startswith(b'leo\t')
    s.close()
print(n, int((time.monotonic() - t0) * 1000))
PY
read -r n ms <<<"$OUT"
t_eq "all answered" "$n" 20
t_check "in well under the silent clients' 2 s deadline (${ms} ms)" test "${ms:-9999}" -lt 1000
t_expect 0 "grant-keys FP(leo) meanwhile" gk "$(fp "$T_KEYS/leo.pub")"
t_has "leo's line" "$OUT" " leo\""
t_check "the silent clients are closed by the node (EOF within 6 s)" wait "$SLOW"
t_check "logged: keys socket connection timed out" grep -q "keys socket connection timed out" "$T_SITE/grantd.log"

t_section "one key, one user (issue 19, N10)"
t_expect 2 "user add zoe with kate's key is refused" t_ctl user add zoe --key "$T_KEYS/kate.pub"
t_has "it names the user who holds it" "$OUT$ERR" "already held by user 'kate'"
t_expect 0 "user list --json" t_ctl user list --json
t_hasnt "zoe was not made" "$OUT" '"zoe"'
t_expect 2 "user add leo --key (his own) --key (kate's) is refused" \
	t_ctl user add leo --key "$T_KEYS/leo.pub" --key "$T_KEYS/kate.pub"
t_expect 0 "grant-keys root FP(kate)" gk "$(fp "$T_KEYS/kate.pub")"
t_has "still kate's line" "$OUT" "--config $T_SITE/grantd.conf kate\""
t_expect 0 "user add zoe with the key of the deleted leo" t_ctl user add zoe --key "$T_KEYS/mallory.pub"
t_expect 0 "user del zoe" t_ctl user del zoe

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
t_expect 3 "grant-keys FP while the node is down: exit 3 (sshd lets no one in)" gk "$(fp "$T_KEYS/leo.pub")"
t_eq "prints nothing" "$OUT" ""
t_has "says why on stderr" "$ERR" "cannot reach the grantd node at $T_SITE/run/keys.sock"
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
