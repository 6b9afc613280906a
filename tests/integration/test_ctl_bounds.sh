#!/bin/bash
# The control sockets bound a request while reading it (SPEC 2.5): each
# message is a 4-byte length and that many bytes (node/requests/usersock.h);
# one that announces more than the limit is refused from its length alone,
# counted as a bad request and answered with status 2, then its connection
# closed; the node reads none of the rest, so its memory does not grow by
# what the client sends, and the next request is served.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || { t_fail "python3 (with the zmq module, python3-zmq) is needed"; t_done; }
t_site_up
export GD_SRC=${GD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}

# send SOCKET LENGTH SIZE: announce LENGTH bytes, send SIZE bytes; prints
# the reply's status.
send() {
	"$PY" - "$@" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["GD_SRC"], "tests", "lib"))
import ctlwire  # noqa: E402
sock, length, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print(ctlwire.status(ctlwire.call(sock, b"x" * size, timeout=60,
                                  length=length)))
PY
}
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$(<"$T_SITE/grantd.pid")/status"; }
bad_requests() { t_ctl status --json | t_json 'j["counts"]["bad_requests"]'; }

D0=$(t_digest)
B0=$(bad_requests)
t_section "a length just over the limit"
t_eq "65,537 bytes announced on the user socket are answered with status 2" \
	"$(send "$T_SITE/run/user.sock" 65537 65537)" 2
t_section "a large total"
H0=$(hwm_kb)
t_eq "100 MB sent on the admin socket are answered with status 2" \
	"$(send "$T_SITE/run/admin.sock" 100000000 100000000)" 2
H1=$(hwm_kb)
# the node reads the length and refuses: what follows is never read
t_check "the node's peak memory grew by less than 10 MB ($(( (H1 - H0) / 1024 )) MB)" \
	test $((H1 - H0)) -lt $((10 * 1000))
t_eq "both were counted as bad requests" "$(bad_requests)" $((B0 + 2))
t_check "and logged" grep -q 'bad request dropped path=.*/admin.sock: 100000000 bytes' "$T_SITE/grantd.log"
t_expect 0 "the node still answers status" t_ctl status
t_eq "nothing changed (digest)" "$(t_digest)" "$D0"
t_user ann
t_expect 0 "a normal request (user add) after them works" t_ctl user list
t_has "and sees ann" "$OUT" ann

t_done
