#!/bin/bash
# The control sockets bound a request while reading it (SPEC 2.5): a
# message of many frames, or of a large total, is dropped frame by frame as
# it is read, counted as a bad request and answered with status 2; the
# node's memory grows by no more than libzmq's own copy of the message, and
# the next request is served.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || { t_fail "python3 with the zmq module (python3-zmq) is needed"; t_done; }
t_site_up

# send SOCKET NFRAMES SIZE: one request of NFRAMES frames of SIZE bytes on
# a REQ socket; prints the reply's status.
send() {
	"$PY" - "$@" <<'PY'
import sys, zmq
sock, nframes, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = zmq.Context()
s = ctx.socket(zmq.REQ)
s.setsockopt(zmq.LINGER, 0)
s.setsockopt(zmq.RCVTIMEO, 60000)
s.connect("ipc://" + sock)
s.send_multipart([b"x" * size] * nframes, copy=False)
rep = s.recv()
# Reply field 1 (status) is a varint right after its tag byte 0x08
print(rep[1] if rep[:1] == b"\x08" else "no-status")
PY
}
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$(<"$T_SITE/grantd.pid")/status"; }
bad_requests() { t_ctl status --json | t_json 'j["counts"]["bad_requests"]'; }

D0=$(t_digest)
B0=$(bad_requests)
t_section "many frames"
t_eq "100,000 empty frames on the user socket are answered with status 2" \
	"$(send "$T_SITE/run/user.sock" 100000 0)" 2
t_section "a large total, each frame under the per-frame cap"
H0=$(hwm_kb)
t_eq "100 frames of 1 MB on the admin socket are answered with status 2" \
	"$(send "$T_SITE/run/admin.sock" 100 1000000)" 2
H1=$(hwm_kb)
# libzmq holds a multipart message whole before the node reads its first
# frame (100 MB here, which the node cannot bound: docs/operations.md);
# the node itself must not copy it (before the bound it did, and its peak
# grew by 3 times the message).
t_check "the node's peak memory grew by less than 1.5 times the message ($(( (H1 - H0) / 1024 )) MB)" \
	test $((H1 - H0)) -lt $((150 * 1000))
t_eq "both were counted as bad requests" "$(bad_requests)" $((B0 + 2))
t_check "and logged" grep -q 'bad request dropped socket=admin: more than 16 frames' "$T_SITE/grantd.log"
t_expect 0 "the node still answers status" t_ctl status
t_eq "nothing changed (digest)" "$(t_digest)" "$D0"
t_user ann
t_expect 0 "a normal request (user add) after them works" t_ctl user list
t_has "and sees ann" "$OUT" ann

t_done
