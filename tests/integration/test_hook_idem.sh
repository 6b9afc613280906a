#!/bin/bash
# grant-hook never loses or reorders a push (issue 8, item 8; SPEC 3.3).
#
# paloalto's hook is pointed, for single pushes, at a stand-in for the
# node's user socket (a Python unix socket, $T_DIR/hooktool.py proxy) that
#   drop      passes the request on to the real node and keeps the answer:
#             the node records the push, the hook gets no answer (the
#             connection closes);
#   STATUS    answers with that status itself (1 refused, 4 the node failed
#             to decide, 2 malformed) and passes nothing on.
# A timed-out push is kept and sent again, with the same id: the node must
# answer the repeat as recorded without a second, newer record, or the
# repeat would move the ref back over a later push from portland.  Every
# answer but "malformed" (2) keeps the push for later.  Then
# `hooktool.py batch` queues hook requests and one request whose handler
# fails (an admin unenroll, while paloalto runs with the store read fault
# GRANTD_TEST_FAULT_AT=read-enroll of node/daemon/crashpoint.h) while the node is
# stopped, so they are read as one batch: the hook requests must still be
# recorded, and the failing one answered 4.
. "$(dirname "$0")/lib.sh"

PY=$(t_py) || {
	echo "skip: no python3 with the zmq module (apt-get install python3-zmq)"
	exit 77
}
export GD_SRC=${GD_SRC:-$(cd "$T_HERE/../.." && pwd)}

t_cluster_up lockout_failures=64
t_expect 0 "paloalto: repo add hi --mode off" t_c paloalto repo add hi --mode off
t_expect_converged "the three sites agree" 20
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 10 "$s: hi.git exists" test -d "$(t_dir "$s")/repos/hi.git/objects"
done

P=$(t_dir paloalto)
HI=$P/repos/hi.git
SPOOL=$HI/grantd-spool
W=$T_DIR/work
git init -q -b main "$W"
commit() { echo "$1" >"$W/f"; git -C "$W" add f; git -C "$W" -c user.name=t -c user.email=t@e commit -qm "$1"; git -C "$W" rev-parse HEAD; }
# push_at SITE ARGS...: push to SITE's hi.git (its own hook runs)
push_at() { local s=$1; shift; git -C "$W" push -q "$(t_dir "$s")/repos/hi.git" "$@"; }
# push_proxied ARGS...: push to paloalto's hi.git, its post-receive hook
# talking to the stand-in (hooktool.py proxy) instead of the node
push_proxied() {
	git -C "$W" push -q --receive-pack="git -c core.hooksPath=$T_DIR/proxy-hooks receive-pack" "$HI" "$@"
}
# ref_at SITE REF: REF of SITE's hi.git on disk
ref_at() { git --git-dir="$(t_dir "$1")/repos/hi.git" rev-parse -q --verify "$2" 2>/dev/null; }
ref_is() { [[ $(ref_at "$1" "$2") == "$3" ]]; }
all_ref_is() { local s; for s in "${T_SITES[@]}"; do ref_is "$s" "$1" "$2" || return 1; done; }
spooled() { ls "$SPOOL"/*.refs >/dev/null 2>&1; }
# nrecorded: paloalto's RefUpdate operations for hi so far
nrecorded() { grep -c "push recorded repo=hi " "$P/grantd.log"; }
conflicts() { git --git-dir="$(t_dir "$1")/repos/hi.git" for-each-ref refs/grantd/; }

cat >"$T_DIR/hooktool.py" <<'PY'
import json, os, random, select, signal, socket, sys, time
sys.path.insert(0, os.path.join(os.environ["GD_SRC"], "tests", "lib"))
from pbwire import field_bytes, field_varint  # noqa: E402
import ctlwire  # noqa: E402


def fields(b):
    """The varint fields of a message: {number: value} (enough for Reply)."""
    out, i = {}, 0
    def varint():
        nonlocal i
        v = s = 0
        while True:
            c = b[i]; i += 1
            v |= (c & 0x7F) << s; s += 7
            if not c & 0x80:
                return v
    while i < len(b):
        key = varint()
        if key & 7 == 0:
            out[key >> 3] = varint()
        elif key & 7 == 2:
            n = varint(); i += n
        else:
            raise ValueError("wire type %d" % (key & 7))
    return out


def request(cmd, args, push_id=None):
    m = field_varint(1, 1) + field_bytes(2, cmd) + b"".join(field_bytes(3, a) for a in args)
    return m + (field_bytes(8, push_id) if push_id else b"")


def push_id():
    return "%016x%016x-0" % (int(time.time() * 1000), random.getrandbits(64))


mode = sys.argv[1]
if mode == "proxy":  # SOCK NODE_SOCK drop|STATUS
    sock, node, how = sys.argv[2:5]
    r = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    r.bind(sock)
    r.listen(16)
    print(json.dumps({"event": "start"}), flush=True)
    while True:
        c, _ = r.accept()
        c.settimeout(10)
        req = ctlwire.recv(c)
        if req is None:
            c.close()
            continue
        if how == "drop":
            # forwarded, and the answer lost: the connection closes
            st = fields(ctlwire.call(node, req, timeout=10)).get(1, 0)
            print(json.dumps({"event": "forwarded", "status": st}), flush=True)
        else:
            st = int(how)
            ctlwire.send(c, field_varint(1, st) +
                         field_bytes(3, "stand-in: status %d" % st))
            print(json.dumps({"event": "answered", "status": st}), flush=True)
        c.close()
elif mode == "batch":  # USER_SOCK ADMIN_SOCK NODE_PID REPO OID N TAG FAILING_USER
    user, admin, pid, repo, oid, n, tag, failing = sys.argv[2:10]
    pid, n = int(pid), int(n)
    hooks = [ctlwire.connect(user, 20) for _ in range(n)]
    adm = ctlwire.connect(admin, 20)
    time.sleep(0.5)  # the node has accepted them
    # the node stopped while every request is queued: it reads them
    # together when it continues
    os.kill(pid, signal.SIGSTOP)
    try:
        ctlwire.send(adm, request("unenroll", [failing]))
        for i, d in enumerate(hooks):
            line = "%s %s refs/heads/%s-%d" % ("0" * 40, oid, tag, i)
            ctlwire.send(d, request("hook.refs", [repo, line], push_id()))
        time.sleep(0.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    out = {"hooks": [], "failing": None}
    def answer(d):
        try:
            rep = ctlwire.recv(d)
        except socket.timeout:
            return None
        return fields(rep).get(1, 0) if rep is not None else None
    for d in hooks:
        out["hooks"].append(answer(d))
    out["failing"] = answer(adm)
    print(json.dumps(out), flush=True)
PY

# The stand-in's config: paloalto's, with the user socket moved.
sed "s|^user_socket = .*|user_socket = $T_DIR/proxy.sock|" "$P/grantd.conf" >"$T_DIR/proxy.conf"
mkdir -p "$T_DIR/proxy-hooks"
printf '#!/bin/sh\nexec "%s/grant-hook" --config "%s/proxy.conf"\n' "$GD_BIN" "$T_DIR" \
	>"$T_DIR/proxy-hooks/post-receive"
chmod +x "$T_DIR/proxy-hooks/post-receive"
PROXY_PID=
proxy_start() { # drop|STATUS
	rm -f "$T_DIR/proxy.sock"
	: >"$T_DIR/proxy.out"
	"$PY" "$T_DIR/hooktool.py" proxy "$T_DIR/proxy.sock" "$P/run/user.sock" "$1" \
		>"$T_DIR/proxy.out" 2>&1 &
	PROXY_PID=$!
	gd_wait_for 10 grep -q '"event": "start"' "$T_DIR/proxy.out" ||
		t_fatal "the stand-in ($1) starts: $(<"$T_DIR/proxy.out")"
}
proxy_stop() {
	[[ -n $PROXY_PID ]] || return 0
	kill -TERM "$PROXY_PID" 2>/dev/null
	wait "$PROXY_PID" 2>/dev/null
	PROXY_PID=
}
trap 'proxy_stop; t_cleanup' EXIT
# hook_run: paloalto's real hook in hi.git with nothing on stdin (what the
# node runs to send a spool)
hook_run() { (cd "$HI" && "$GD_BIN/grant-hook" --config "$P/grantd.conf" </dev/null); }

t_section "a push whose answer times out is recorded once"
C1=$(commit one)
t_expect 0 "push main ($C1) to paloalto" push_at paloalto HEAD:refs/heads/main
t_expect_soon 0 20 "every site has main at $C1" all_ref_is refs/heads/main "$C1"
n0=$(nrecorded)
proxy_start drop
C2=$(commit two)
t_expect 0 "push main ($C2) to paloalto, the hook's answer lost (a 15 s timeout)" push_proxied HEAD:refs/heads/main
t_has "the hook says the push is kept" "$ERR" "kept in grantd-spool/"
t_check "the node did record it (the stand-in passed it on, status 0)" \
	grep -q '"event": "forwarded", "status": 0' "$T_DIR/proxy.out"
proxy_stop
t_eq "one more RefUpdate at paloalto" "$(nrecorded)" "$((n0 + 1))"
t_check "the push waits in grantd-spool/" spooled
t_check "... with its id" eval 'grep -qE "^id [0-9a-f]{32}$" "$SPOOL"/*.refs'
t_expect_soon 0 20 "portland has main at $C2 (the recorded push replicated)" ref_is portland refs/heads/main "$C2"
C3=$(commit three)
t_expect 0 "a later push at portland: main $C2 -> $C3" push_at portland HEAD:refs/heads/main
# paloalto's actor sees the spool when portland's record arrives and runs
# the hook, which sends the kept push again (as a restart would)
t_expect_soon 0 30 "the kept push is sent again (spool emptied)" eval '! spooled'
t_expect_converged "the three sites agree" 30
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: main is portland's later $C3 (not moved back to $C2)" ref_is "$s" refs/heads/main "$C3"
	t_eq "$s: no conflict kept (the repeat made no record)" "$(conflicts "$s")" ""
done
t_eq "paloalto made no second RefUpdate for the repeat" "$(nrecorded)" "$((n0 + 1))"
t_check "paloalto's log says the repeat was recorded already" \
	t_grep_log paloalto "push already recorded repo=hi"

t_section "a push of many refs is sent in parts, each recorded once"
# 200 lines with long refs (about 300 bytes each) make two requests (48
# KiB at most each): the first is recorded and its answer lost; sent
# again, the first is a repeat and the second is new
refs_at() { t_sj "$1" "j['counts']['refs']"; }
r0=$(refs_at paloalto)
pad=$(printf 'p%.0s' {1..200})
n0=$(nrecorded)
a0=$(grep -c "push already recorded repo=hi " "$P/grantd.log")
proxy_start drop
specs=()
for i in $(seq 1 200); do specs+=("HEAD:refs/heads/many-$pad-$i"); done
t_expect 0 "push 200 new refs to paloalto, the hook's answer lost" push_proxied "${specs[@]}"
proxy_stop
t_eq "the stand-in passed on one request (the first part)" \
	"$(grep -c '"event": "forwarded", "status": 0' "$T_DIR/proxy.out")" 1
# the first part recorded; and the second too once the node itself has
# sent the kept push (its reconciler runs the hook when it meets a ref of a
# repository with a spool: reconcile.c spooled()), which may be before this
# check (a fresh clone saw it)
n1=$(nrecorded)
t_check "the first part recorded, the second only if the node sent the kept push ($n1 after $n0)" \
	eval '(( n1 == n0 + 1 )) || { (( n1 == n0 + 2 )) && ! spooled; }'
t_expect 0 "the hook run again (empty stdin) sends the kept push" hook_run
t_check "spool emptied" eval '! spooled'
t_eq "one more RefUpdate: the second part only" "$(nrecorded)" "$((n0 + 2))"
t_eq "the first part was a repeat" "$(grep -c "push already recorded repo=hi " "$P/grantd.log")" "$((a0 + 1))"
t_eq "paloalto holds 200 more ref records" "$(refs_at paloalto)" "$((r0 + 200))"
t_expect_soon 0 30 "portland holds them too" eval '(( $(refs_at portland) == r0 + 200 ))'
# nmany SITE: refs/heads/many-* in SITE's hi.git
nmany() { git --git-dir="$(t_dir "$1")/repos/hi.git" for-each-ref --format='%(refname)' refs/heads/ | grep -c '^refs/heads/many-'; }
t_expect_soon 0 60 "portland has the 200 refs on disk" eval '(( $(nmany portland) == 200 ))'

t_section "an answer other than 'malformed' keeps the push"
for st in 1 4; do
	proxy_start "$st"
	c=$(commit "status-$st")
	t_expect 0 "push main ($c) to paloalto, the stand-in answers status $st" push_proxied HEAD:refs/heads/main
	t_has "the hook shows the answer" "$ERR" "stand-in: status $st"
	t_has "the hook says the push is kept" "$ERR" "kept in grantd-spool/"
	proxy_stop
	t_check "the push waits in grantd-spool/" spooled
	t_check "... its line names $c" eval 'grep -q " $c refs/heads/main\$" "$SPOOL"/*.refs'
	t_expect 0 "the hook run again (empty stdin, as the node runs it) sends it" hook_run
	t_check "spool emptied" eval '! spooled'
	t_expect_soon 0 20 "every site has main at $c" all_ref_is refs/heads/main "$c"
done

t_section "'malformed' (status 2) is final: nothing kept"
proxy_start 2
c=$(commit junk)
t_expect 0 "push junk ($c) to paloalto, the stand-in answers status 2" push_proxied HEAD:refs/heads/junk
t_has "the hook says it was refused as malformed" "$ERR" "malformed; nothing kept"
proxy_stop
t_check "nothing waits in grantd-spool/" eval "! spooled"

t_section "a failing request does not fail the others of its batch"
t_expect 0 "paloalto: user add zed" t_c paloalto user add zed
t_wait_converged 20
t_stop paloalto
GRANTD_TEST_FAULT_AT=read-enroll t_start paloalto
for round in 1 2 3; do
	out=$("$PY" "$T_DIR/hooktool.py" batch "$P/run/user.sock" "$P/run/admin.sock" \
		"$(<"$P/grantd.pid")" hi "$C1" 6 "batch$round" zed)
	t_eq "round $round: the six co-batched hook requests are recorded (status 0)" \
		"$(t_json 'j["hooks"]' <<<"$out")" "[0, 0, 0, 0, 0, 0]"
	st=$(t_json 'j["failing"]' <<<"$out")
	t_eq "round $round: the failing unenroll is answered 4 (the node failed to decide)" "$st" 4
done
t_check "paloalto's log names the failed request" t_grep_log paloalto "request failed cmd=unenroll"
t_expect_converged "the three sites agree" 30
# nbatch SITE: refs/heads/batch* in SITE's hi.git
nbatch() { git --git-dir="$(t_dir "$1")/repos/hi.git" for-each-ref --format='%(refname)' refs/heads/ | grep -c '^refs/heads/batch'; }
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s: the 18 refs of the batches are there" eval "(( \$(nbatch $s) == 18 ))"
done
t_stop paloalto
t_start paloalto
t_expect 0 "zed is still a user (the failing unenroll changed nothing)" eval 't_c paloalto user list | grep -qw zed'

t_done
