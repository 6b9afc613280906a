#!/usr/bin/python3
"""planes_walk.py: every kind of PeerMsg, sent to a real node's sync ROUTER
from one key, gets the answer of the planes table (node/peers/planes.h), for
tests/integration/test_planes.sh.  Needs python3-zmq.

  planes_walk.py walk ROLE SYNC SERVER_KEY KEYFILE SITE SRC STATUS_CMD...
      With the key pair of SITE (a peer configured as ROLE: frontend or
      mirror), for each body case of PeerMsg's oneof (read from
      SRC/proto/grantd.proto), send one message of that kind (a minimal
      body; vote_req and use_sync_req real ones), then a vv_req as a fence:
      when the fence's answer (a heartbeat) comes, the node has dispatched
      the kind.  Then STATUS_CMD (`grantctl status --json`) says whether
      its replication.dropped.plane counter moved.  The table's answer for
      (sync, ROLE), read from SRC/node/peers/planes.h, must hold:
        take       the counter did not move (and a vote_req or use_sync_req
                   got its real answer: a VoteRep not NOT_VOTER, a
                   UseSyncRep with voter = true)
        drop       the counter moved by one, nothing came back
        not_voter  the counter moved by one, and the answer is NOT_VOTER:
                   a VoteRep with the pid alone, a UseSyncRep with voter =
                   false and no record
      A kind of the oneof without a row fails.  Prints one JSON line per
      kind; exit 0 when every kind got its answer.
      The vote_req proposes next = 2^64-1 for user kim's enrollment
      PLANES_ENROLL_ID (environment; default 1).
  planes_walk.py uses SYNC SERVER_KEY KEYFILE SITE
      use_sync_req from SITE's key: prints {"answered", "voter", "uses":
      [{"user", "enroll_id", "next"}]}, what the node tells that key.
  planes_walk.py unknown SYNC SERVER_KEY WAIT_S SRC
      A fresh key pair no node knows sends every kind: nothing comes back
      in WAIT_S (ZAP refused the handshake).
"""
import json
import os
import re
import subprocess
import sys
import time

import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from pbwire import field_bytes, field_varint  # noqa: E402
from repl_rogue import load_keys, pb_fields, pb_one, peer_msg, sock  # noqa: E402

VV_REQ_FIELD = 14
HEARTBEAT_FIELD = 11
CKPT_REP_FIELD = 31
PACK_ERR_FIELD = 20
VOTE_NOT_VOTER = 4


def oneof_kinds(src):
    """{NAME: (field number, type)} of PeerMsg's oneof body."""
    text = open(os.path.join(src, "proto", "grantd.proto")).read()
    m = re.search(r"message PeerMsg \{.*?oneof body \{(.*?)\}", text, re.S)
    out = {}
    for t, name, num in re.findall(r"(\w+)\s+(\w+)\s*=\s*(\d+);", m.group(1)):
        out[name.upper()] = (int(num), t)
    return out


def table(src):
    """{NAME: {"frontend": answer, "mirror": answer}} on the sync socket."""
    text = open(os.path.join(src, "node", "peers", "planes.h")).read()
    names = {"PL_T": "take", "PL__": "drop", "PL_N": "not_voter"}
    out = {}
    for row in re.findall(r"X\((\w+),\s*(PL_\w),\s*(PL_\w),", text):
        out[row[0]] = {"frontend": names[row[1]], "mirror": names[row[2]]}
    return out


def body_of(name, num, typ):
    if name == "VOTE_REQ":
        # a use far above any look-ahead: a voter must never promise it
        eid = int(os.environ.get("PLANES_ENROLL_ID", "1"))
        return field_bytes(num, field_varint(1, 4242) + field_bytes(2, "kim") +
                           field_varint(3, eid) + field_varint(5, 2**64 - 1) +
                           field_varint(7, int(time.time() * 1000)))
    if name == "USE_SYNC_REQ":
        return field_bytes(num, field_varint(2, 256))
    if typ == "bool":
        return field_varint(num, 1)
    return field_bytes(num, b"")


def plane_dropped(cmd):
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
    return int(j["replication"]["dropped"]["plane"])


# status is the writer's copy, published every 100 ms (node/daemon/main.c
# STATUS_MS): a count is read once it has held for this long
SETTLE_S = 0.5


def plane_moved(cmd, before, want):
    """How far the counter moved from before: polled until it reached want
    (or 10 s passed), then until it held for SETTLE_S."""
    deadline = time.monotonic() + 10
    now = plane_dropped(cmd)
    while now - before < want and time.monotonic() < deadline:
        time.sleep(0.05)
        now = plane_dropped(cmd)
    held_since = time.monotonic()
    while time.monotonic() - held_since < SETTLE_S:
        time.sleep(0.1)
        n = plane_dropped(cmd)
        if n != now:
            now, held_since = n, time.monotonic()
    return now - before


def until_fence(dealer, wait_s, heartbeats):
    """Frames before the fence's heartbeat (the last of `heartbeats`: a
    vv_req walked is answered by one too); None when it never came."""
    got = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not dealer.poll(100):
            continue
        f = pb_fields(dealer.recv())
        if HEARTBEAT_FIELD in f:
            heartbeats -= 1
            if not heartbeats:
                return got
        got.append(f)
    return None


def walk(role, sync, server_key, keyfile, site, src, status_cmd):
    kinds, rows = oneof_kinds(src), table(src)
    dealer = sock(zmq.Context.instance(), zmq.DEALER, sync, server_key,
                  load_keys(keyfile))
    bad = 0
    for name, (num, typ) in sorted(kinds.items(), key=lambda k: k[1][0]):
        if name not in rows:
            print(json.dumps({"kind": name, "error": "no row in planes.h"}))
            bad += 1
            continue
        want = rows[name][role]
        before = plane_moved(status_cmd, 0, 0)
        dealer.send(peer_msg(sender=site, body=body_of(name, num, typ)))
        dealer.send(peer_msg(sender=site, body=field_varint(VV_REQ_FIELD, 1)))
        back = until_fence(dealer, 20, 2 if name == "VV_REQ" else 1)
        moved = plane_moved(status_cmd, before, 0 if want == "take" else 1)
        if back:
            # the git actor answers pack requests from its own thread, so
            # a pack_err (20) may come after the fence: not this kind's
            back = [b for b in back if PACK_ERR_FIELD not in b]
            # a ckpt_rep (31) can only answer the ckpt_req walked before
            # it, which a mirror's key is answered too; seen after that
            # step's fence now and then (not this kind's)
            if name != "CKPT_REQ":
                back = [b for b in back if CKPT_REP_FIELD not in b]
        ok = back is not None
        seen = {}
        if ok and want == "take":
            ok = moved == 0
            if name == "VOTE_REQ":
                rep = [pb_fields(pb_one(b, 22)) for b in back if 22 in b]
                seen["verdict"] = [pb_one(r, 2, 0) for r in rep]
                ok = ok and len(rep) == 1 and \
                    pb_one(rep[0], 2, 0) != VOTE_NOT_VOTER
            if name == "USE_SYNC_REQ":
                rep = [pb_fields(pb_one(b, 24)) for b in back if 24 in b]
                seen["voter"] = [pb_one(r, 4, 0) for r in rep]
                ok = ok and len(rep) == 1 and pb_one(rep[0], 4, 0) == 1
        elif ok and want == "drop":
            ok = moved == 1 and not back
        elif ok and want == "not_voter":
            ok = moved == 1 and len(back) == 1
            if ok and name == "VOTE_REQ":
                r = pb_fields(pb_one(back[0], 22, b""))
                seen = {"pid": pb_one(r, 1), "verdict": pb_one(r, 2),
                        "next": pb_one(r, 3), "votes": pb_one(r, 4)}
                ok = seen["pid"] == 4242 and \
                    seen["verdict"] == VOTE_NOT_VOTER and \
                    seen["next"] is None and seen["votes"] is None
            elif ok:
                r = pb_fields(pb_one(back[0], 24, b""))
                seen = {"voter": pb_one(r, 4), "keys": len(r.get(1, [])),
                        "votes": pb_one(r, 5)}
                ok = seen["voter"] == 0 and seen["keys"] == 0 and \
                    seen["votes"] is None
        print(json.dumps({"kind": name, "role": role, "want": want,
                          "counted": moved, "answers": None if back is None
                          else len(back), "seen": seen, "ok": ok}))
        bad += not ok
    return 1 if bad else 0


def unknown(sync, server_key, wait_s, src):
    dealer = sock(zmq.Context.instance(), zmq.DEALER, sync, server_key, None)
    for name, (num, typ) in oneof_kinds(src).items():
        dealer.send(peer_msg(body=body_of(name, num, typ)))
    n = 0
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if dealer.poll(100):
            dealer.recv()
            n += 1
    print(json.dumps({"sent": len(oneof_kinds(src)), "answered": n}))
    return 0 if n == 0 else 1


def uses(sync, server_key, keyfile, site):
    dealer = sock(zmq.Context.instance(), zmq.DEALER, sync, server_key,
                  load_keys(keyfile))
    dealer.send(peer_msg(sender=site, body=body_of("USE_SYNC_REQ", 23, "")))
    out = {"answered": False, "voter": None, "uses": []}
    if dealer.poll(10000):
        r = pb_fields(pb_one(pb_fields(dealer.recv()), 24, b""))
        out["answered"] = True
        out["voter"] = pb_one(r, 4)
        for k, v in zip(r.get(1, []), r.get(2, [])):
            user, _, eid = k.partition(b"\0")
            out["uses"].append({"user": user.decode(errors="replace"),
                                "enroll_id": int.from_bytes(eid, "big"),
                                "next": pb_one(pb_fields(v), 3, 0)})
    print(json.dumps(out))
    return 0 if out["answered"] else 1


def main(argv):
    if argv[1] == "uses":
        return uses(*argv[2:6])
    if argv[1] == "walk":
        role, sync, server_key, keyfile, site, src = argv[2:8]
        return walk(role, sync, server_key, keyfile, site, src, argv[8:])
    if argv[1] == "unknown":
        sync, server_key, wait_s, src = argv[2:6]
        return unknown(sync, server_key, float(wait_s), src)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
