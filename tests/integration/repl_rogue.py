#!/usr/bin/python3
"""repl_rogue.py: ZeroMQ clients that are not (or misbehave as) grantd
peers, for tests/integration/test_repl_security.sh.  Needs python3-zmq.

  repl_rogue.py unknown-key PUBLISH SYNC SERVER_KEY WAIT_S
      CURVE client with a fresh key pair no node knows: a SUB on the node's
      publish endpoint and a DEALER on its sync endpoint that asks for the
      node's version vector.  Prints what came back; exit 0 when nothing.
  repl_rogue.py plain PUBLISH SYNC WAIT_S
      The same without CURVE (ZMTP NULL mechanism).
  repl_rogue.py peer SUB|DEALER PUBLISH SYNC SERVER_KEY KEYFILE WAIT_S
      Positive control: with a configured peer's key pair (KEYFILE from
      `grantctl keygen`), the same requests do get answers; exit 0 when
      something came back within WAIT_S.
  repl_rogue.py mirror PUBLISH SYNC SERVER_KEY KEYFILE SITE WAIT_S
      With the key pair of SITE, a peer configured as a mirror: a SUB on
      the node's publish endpoint (its ZAP handler must refuse a mirror
      there) and a DEALER on its sync endpoint asking for the vector (which
      must answer).  Exit 0 when the SUB got nothing in WAIT_S and the
      DEALER got an answer.
  repl_rogue.py ask-range SYNC SERVER_KEY KEYFILE SITE ORIGIN EPOCH FROM WAIT_S
      As SITE (KEYFILE, a configured peer's key pair), ask the node's sync
      ROUTER for ORIGIN's operations of EPOCH (hex) from sequence FROM on,
      as a node does in range repair.  Prints {"answered", "ops",
      "truncated", "retired"}; exit 0 when answered within WAIT_S.
  repl_rogue.py garbage SYNC SERVER_KEY KEYFILE COUNT SEED
      With a configured peer's key pair, send COUNT random single-frame
      messages and a set of crafted bad PeerMsg frames (wrong version,
      sender not matching the key, bad names, unknown families, bodies not
      allowed on the sync endpoint) and a few multi-frame messages to the
      node's sync ROUTER, then one frame over its size limit.  Prints how
      many messages were sent (each must be dropped and counted; the
      oversized one is not delivered at all); exit 0 when none was
      answered.

  repl_rogue.py fake-pub PUBLISH KEYFILE SITE SEED SECONDS
      Stand in for peer SITE (its node stopped): bind its publish endpoint
      with its key pair and publish, every 50 ms, operations the node must
      refuse (an origin no one is configured with, a bad user name, a zero
      sequence number, a sender that does not match the link, another
      protocol version), random frames and a multi-frame message.  Prints
      {"per_round": N} first.

  repl_rogue.py heads PUBLISH KEYFILE SITE ORIGIN N HASH SECONDS
      Stand in for peer SITE (its node stopped): bind its publish endpoint
      with its key pair and publish, every 100 ms, a heartbeat and the push
      log heads [(ORIGIN, N, HASH (hex))] (PeerMsg body 27): a peer that
      reports another entry N of ORIGIN than the node holds.  Prints
      {"event": "start"} first.

  repl_rogue.py forge-ckpt PUBLISH KEYFILE SITE NAME SIZE SECONDS
      Stand in for frontend SITE on its publish endpoint (its node stopped)
      and publish, every 100 ms for SECONDS, a push log checkpoint of NAME
      (HOST/grantd/SITE) at tree size SIZE with a root that is no tree's,
      signed with SITE's own key (node/peers/tlogwit.h: witnesses refuse it
      and keep it as proof).  Prints {"event": "start", "note": ...}.

  repl_rogue.py rogue-git MODE PUBLISH SYNC KEYFILE SITE REPO REF GITDIR SECONDS
      Stand in for peer SITE (its node stopped) as a source of repository
      objects: bind SITE's publish and sync endpoints as a CURVE server with
      its key pair; publish, every 100 ms until SECONDS have passed, a
      heartbeat whose vector holds (SITE, EPOCH, 1) and the one operation
      Op{origin SITE, a fresh random EPOCH, seq 1, refs RefUpdate{REPO,
      [REF: zeros -> TIP]}}, TIP being what REF names in the git repository
      GITDIR (a tip no real site has); answer a RangeReq for it on the sync
      ROUTER, and a vv_req with the heartbeat.  A PackReq for REPO that wants
      TIP is answered with PackChunk{id, seq 0, 1, ..., data, last} frames of
      at most 8 KiB, never more than the asker's credit ahead (PackCredit
      adds to it, PackErr from the asker ends the stream), the last one
      empty with last = true, carrying according to MODE:
        good         the pack of TIP (`git pack-objects --revs --stdout`)
        corrupt      that pack with 16 bytes in its middle inverted
        truncated    that pack cut at 60 % of its length
        unconnected  a valid pack of the commit TIP alone (no --revs): its
                     tree and parents are missing
        smuggle      the pack of TIP plus one more object: the commit X that
                     refs/heads/smuggled names in GITDIR, alone (its tree and
                     parents are neither in the pack nor at the asker).  The
                     wants check out, so the asker keeps X's object.
      Any other PackReq gets PackErr "not here".
      In mode smuggle, SIGUSR1 moves the stand-in on one phase, logging
      {"event": "phase", "phase": N}:
        1  publish (and answer RangeReq with) a second operation, seq 2 of
           EPOCH: RefUpdate{REPO, [refs/heads/smuggled: zeros -> X]}; a
           PackReq that wants X still gets PackErr "not here" (the asker
           must not point a ref at X, which it has but not connected)
        2  a PackReq whose wants are TIP and/or X gets the whole history of
           X (`git pack-objects --revs`): now the ref may move to X  Prints one JSON object per
      line: {"event": "start", "tip", "epoch", "pack_bytes", ...} first, then
      every request, stream and cancellation, and {"event": "end", ...}
      totals at the end (also on SIGTERM).

  repl_rogue.py forge ATTACK PUBLISH SYNC KEYFILE SITE VICTIM VEPOCH VSEQ SECONDS
      Stand in for peer SITE (its node stopped) with SITE's key pair, binding
      its publish and sync endpoints, and lie about another site, VICTIM,
      whose current epoch is VEPOCH (hex) and last sequence number VSEQ.
      Publishes a heartbeat of SITE every 100 ms until SECONDS have passed,
      and, by ATTACK:
        live     also publishes Op{origin VICTIM, VEPOCH, VSEQ + 1, a Grant
                 of kim from 10.66.6.6}: an operation in VICTIM's name on
                 SITE's own live channel, taking VICTIM's next slot
        snap     the heartbeat claims (SITE, a fresh EPOCH, 1); a RangeReq
                 for it is answered `truncated`, so the node asks SITE for
                 a state transfer, which is answered with the vector
                 [(SITE, EPOCH, 1), (VICTIM, VEPOCH, 2^62)] and, in the grants
                 family, a Grant of kim from 10.66.6.7 stamped near 2^64
        snap-vv  the same with honest records (none) but the forged vector
        snap-bare  as snap, with the vector [(SITE, EPOCH, 1)] only and, in
                 the grants family, a Grant of kim from 127.0.7.8 that
                 VICTIM would have made: stamped now, origin VICTIM, sent
                 with an empty RecordOps (SnapRep.ops: no operations, as a
                 store written before signing sends it); only the
                 signature rule can refuse it (recops.h)
        snap-wrongkey  the same, a Grant of kim from 127.0.7.9, sent with a
                 RecordOps holding the operation that makes it,
                 Op{origin VICTIM, VEPOCH, VSEQ + 1, that Grant}, signed
                 with SITE's own key
        hugevv   the heartbeat holds (SITE, EPOCH, 1) followed by 5,000
                 entries of made-up sites: more than a node accepts
        pushlog  SITE's own push log, lying (VICTIM and its numbers unused):
                 the heartbeat claims (SITE, a fresh EPOCH, 6) and the six
                 operations are published, each a PushLogEntry of SITE
                 stamped from T0 = now - 60 s:
                   1  entry 1 at T0
                   2  entry 2 at T0 + 20 s
                   3  entry 2 again, at T0 + 10 s (older than the first 2,
                      after entry 1), user mallory, another commit: a fork
                   4  entry 3 at T0 + 5 s: stamped before its predecessor
                   5  entry 3 at T0 + 30 s whose prev is no entry's hash
                   6  entry 5 at T0 + 40 s (entry 4 skipped)
                 The "start" line carries the hashes of both entries 2
                 (hash2, hash2b).
        mirror-feed  SITE as a frontend feeding a mirror: a MirrorSub is
                 answered with live MirrorOps (range unset) holding
                 MirrorOp{origin VICTIM, VEPOCH, VSEQ + 1, op: a User
                 "forged-feed" of VICTIM}: another origin's operation on
                 SITE's live feed
        range    answers a RangeReq for SITE with a RangeRep of VICTIM:
                 origin VICTIM, epoch VEPOCH, from VSEQ + 1, one Op of
                 VICTIM (a Grant of kim from 10.66.6.8) at VSEQ + 1
        relay    the heartbeat also claims (VICTIM, VEPOCH, VSEQ + 1), so a
                 node asks SITE for VICTIM's range, as it may when SITE
                 holds what VICTIM sent; each RangeReq for VICTIM is
                 answered with Op{VICTIM, VEPOCH, VSEQ + 1, a Grant of kim
                 from 10.66.6.9}, to each asker in turn unsigned and signed
                 with SITE's own key (common/opsig.h): a relayed operation
                 its origin never made
      Every operation of SITE's own (pushlog) is signed with SITE's key, as
      a dishonest site that holds it would (a batch of one: OpSig{sig,
      index 0, count 1, root}); the key is derived from KEYFILE's CURVE secret as
      grantd derives it.
      Prints one JSON object per line: {"event": "start", ...} first, each
      request received ({"event": "range_req" | "snap_req", ...}), and
      {"event": "end", ...} totals at the end (also on SIGTERM).

Absence can only be shown by waiting: WAIT_S bounds those waits (heartbeats
come every 250 ms, so a second is four of them).
"""
import configparser
import json
import os
import random
import sys
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from pbwire import field_bytes, field_varint  # noqa: E402


# GD_PEER_VERSION of node/peers/peer.h: the protocol the nodes speak
PEER_VERSION = 2


def peer_msg(version=PEER_VERSION, sender="portland", body=b""):
    """A grantd.v1.PeerMsg (proto/grantd.proto) by hand: version = PEER_VERSION,
    from = 2, sent_us = 3, bodies 10..16."""
    m = b""
    if version is not None:
        m += field_varint(1, version)
    if sender is not None:
        m += field_bytes(2, sender)
    m += field_varint(3, int(time.time() * 1e6))
    return m + body


VV_REQ = field_varint(14, 1)


def curve_server(ctx, kind, endpoint, sec):
    """A socket of kind bound at endpoint as a CURVE server with secret sec
    (a stand-in site's PUB or ROUTER)."""
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.CURVE_SERVER, 1)
    s.setsockopt(zmq.CURVE_SECRETKEY, sec)
    s.bind(endpoint)
    return s


def drain(router, on_frame, on_other=None):
    """Hand every (identity, frame) waiting on router to on_frame; a
    message of another shape goes to on_other (its frame count)."""
    while True:
        try:
            frames = router.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        if len(frames) == 2:
            on_frame(frames[0], frames[1])
        elif on_other:
            on_other(len(frames))


def site_key(keyfile):
    """The Ed25519 key grantd signs with, derived from keyfile's CURVE
    secret (common/opsig.c: the seed is libsodium's
    crypto_kdf_derive_from_key(32, 1, "grantdsg", CURVE secret), which is
    keyed BLAKE2b with the subkey id as salt and the context as person),
    and its raw public key."""
    import hashlib
    import struct
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives import serialization
    from zmq.utils import z85
    _, sec = load_keys(keyfile)
    seed = hashlib.blake2b(b"", digest_size=32, key=z85.decode(sec),
                           salt=struct.pack("<Q", 1) + bytes(8),
                           person=b"grantdsg" + bytes(8)).digest()
    key = Ed25519PrivateKey.from_private_bytes(seed)
    return key, key.public_key().public_bytes(serialization.Encoding.Raw,
                                              serialization.PublicFormat.Raw)


def op_signer(keyfile):
    """sign(op) -> op with its field 30, signed as a batch of one (the
    first of its chain: prev zeros) by the site of keyfile (site_key);
    also the raw public key."""
    import hashlib
    key, pub = site_key(keyfile)

    def sign(op):
        root = hashlib.sha256(b"\x00" + op).digest()
        prev = bytes(32)  # no batch before (opsig.h's chain)
        sig = key.sign(b"grantd op batch v2\n" + prev + root)
        return op + field_bytes(30, field_bytes(1, sig) + field_varint(2, 0) +
                                field_varint(3, 1) + field_bytes(5, root) +
                                field_bytes(6, prev))
    return sign, pub


def ckpt_note(keyfile, name, size, root):
    """A C2SP checkpoint note of (name, size, root) signed with the
    signed-note key grantd derives from keyfile (op_signer's)."""
    import base64
    import hashlib
    key, pub = site_key(keyfile)
    text = "%s\n%d\n%s\n" % (name, size, base64.b64encode(root).decode())
    kid = hashlib.sha256(name.encode() + b"\n\x01" + pub).digest()[:4]
    sig = base64.b64encode(kid + key.sign(text.encode())).decode()
    return (text + "\n\u2014 " + name + " " + sig + "\n").encode()


def forge_ckpt(ctx, publish, keyfile, site, name, size, secs):
    """forge-ckpt: stand in for SITE on its PUB endpoint and publish, every
    100 ms, a checkpoint of its log NAME at SIZE whose root is no tree's
    (SHA-256 of "forged"), signed with SITE's key: what witnesses must
    refuse and keep as proof."""
    import hashlib
    _, sec = load_keys(keyfile)
    pub = curve_server(ctx, zmq.PUB, publish, sec)
    note = ckpt_note(keyfile, name, int(size), hashlib.sha256(b"forged").digest())
    print(json.dumps({"event": "start", "note": note.decode()}), flush=True)
    end = time.monotonic() + float(secs)
    while time.monotonic() < end:
        pub.send(peer_msg(sender=site, body=field_bytes(28, field_bytes(1, note))))
        time.sleep(0.1)
    return 0


def load_keys(path):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(path)
    return (cp["curve"]["public-key"].strip().encode(),
            cp["curve"]["secret-key"].strip().encode())


def sock(ctx, kind, endpoint, server_key=None, keys=None):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    if server_key is not None:
        pub, sec = keys if keys else zmq.curve_keypair()
        s.setsockopt(zmq.CURVE_SERVERKEY, server_key.encode()
                     if isinstance(server_key, str) else server_key)
        s.setsockopt(zmq.CURVE_PUBLICKEY, pub)
        s.setsockopt(zmq.CURVE_SECRETKEY, sec)
    if kind == zmq.SUB:
        s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(endpoint)
    return s


def listen(socks, wait_s, stop_at_first=False):
    """Receive from socks for wait_s seconds; returns counts per socket."""
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    got = {id(s): 0 for s in socks}
    deadline = time.monotonic() + wait_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for s, _ in poller.poll(int(left * 1000) + 1):
            while True:
                try:
                    s.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                got[id(s)] += 1
        if stop_at_first and all(got.values()):
            break
    return [got[id(s)] for s in socks]


def probe(ctx, publish, sync, server_key, keys, wait_s, want):
    sub = sock(ctx, zmq.SUB, publish, server_key, keys)
    dealer = sock(ctx, zmq.DEALER, sync, server_key, keys)
    # A DEALER queues the request until a connection exists; a refused
    # handshake means it is never sent, which is the point.
    dealer.send(peer_msg(body=VV_REQ))
    n_sub, n_dealer = listen([sub, dealer], wait_s, stop_at_first=want)
    print(json.dumps({"sub_received": n_sub, "dealer_received": n_dealer}))
    return n_sub, n_dealer


# ---- rogue-git ---------------------------------------------------------------

def pb_fields(b):
    """Decode one protobuf message into {field number: [values]}: ints for
    varints, bytes for length-delimited fields (enough for PeerMsg and the
    bodies a sync ROUTER receives).  Raises ValueError on bad framing."""
    out = {}
    i, n = 0, len(b)

    def varint_at(i):
        v = shift = 0
        while True:
            if i >= n or shift > 63:
                raise ValueError("bad varint")
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v, i
    while i < n:
        key, i = varint_at(i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint_at(i)
        elif wt == 2:
            ln, i = varint_at(i)
            if i + ln > n:
                raise ValueError("field past the end")
            v, i = b[i:i + ln], i + ln
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def pb_one(f, num, default=None):
    v = f.get(num)
    return v[-1] if v else default


def git_out(gitdir, args, stdin=b""):
    import subprocess
    return subprocess.run(["git", "-C", gitdir] + args, input=stdin,
                          stdout=subprocess.PIPE, check=True).stdout


def rogue_git(ctx, mode, publish, sync, keyfile, site, repo, ref, gitdir, secs):
    import secrets
    import signal

    modes = ("good", "corrupt", "truncated", "unconnected", "smuggle")
    if mode not in modes:
        print("rogue-git: MODE is one of " + " ".join(modes), file=sys.stderr)
        return 2
    chunk_max = 8192
    tip = git_out(gitdir, ["rev-parse", "--verify", ref + "^{commit}"]).decode().strip()
    full = git_out(gitdir, ["pack-objects", "--revs", "--stdout", "-q"],
                   (tip + "\n").encode())
    if mode == "good":
        pack = full
    elif mode == "corrupt":
        mid = len(full) // 2
        pack = full[:mid] + bytes(c ^ 0xFF for c in full[mid:mid + 16]) + full[mid + 16:]
    elif mode == "truncated":
        pack = full[:len(full) * 6 // 10]
    elif mode == "unconnected":  # the commit object alone
        pack = git_out(gitdir, ["pack-objects", "--stdout", "-q"], (tip + "\n").encode())
    smuggled_ref = "refs/heads/smuggled"
    xtip, xpack = None, b""
    if mode == "smuggle":
        # the objects of the good pack plus X's commit object alone
        # (without --revs pack-objects takes exactly the ids it is given)
        xtip = git_out(gitdir, ["rev-parse", "--verify",
                                smuggled_ref + "^{commit}"]).decode().strip()
        ids = [ln.split()[0] for ln in git_out(
            gitdir, ["rev-list", "--objects", tip]).decode().splitlines() if ln]
        if xtip in ids:
            print("rogue-git: X is reachable from TIP", file=sys.stderr)
            return 2
        pack = git_out(gitdir, ["pack-objects", "--stdout", "-q"],
                       ("\n".join(ids + [xtip]) + "\n").encode())
        xpack = git_out(gitdir, ["pack-objects", "--revs", "--stdout", "-q"],
                        (xtip + "\n").encode())
    phase = [0]   # smuggle: 0, then 1 and 2 on SIGUSR1
    bumps = [0]   # SIGUSR1s not acted on yet
    counts = {"pack_reqs": 0, "streams": 0, "streams_done": 0, "cancelled": 0,
              "refused_reqs": 0, "chunks": 0, "bytes": 0, "credits": 0,
              "range_reqs": 0, "ops_published": 0}

    def log(event, **kw):
        kw = dict({"event": event}, **kw)
        print(json.dumps(kw, sort_keys=True), flush=True)

    def stop(*_):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, stop)

    def bump(*_):
        bumps[0] += 1
    signal.signal(signal.SIGUSR1, bump)

    _, sec = load_keys(keyfile)

    pub = curve_server(ctx, zmq.PUB, publish, sec)
    router = curve_server(ctx, zmq.ROUTER, sync, sec)

    epoch = secrets.randbits(62) + 1
    hlc = int(time.time() * 1000) << 16
    zeros = "0" * 40
    change = field_bytes(1, ref) + field_bytes(2, zeros) + field_bytes(3, tip)
    op = (field_bytes(1, site) + field_varint(2, epoch) + field_varint(3, 1) +
          field_varint(4, hlc) +
          field_bytes(17, field_bytes(1, repo) + field_bytes(2, change)))
    sign, _ = op_signer(keyfile)  # its own operations: signed, as SITE's
    ops = [sign(op)]  # what has been published, seq 1 ...

    def heartbeat():
        now = int(time.time() * 1000) << 16
        vv = field_bytes(1, field_bytes(1, site) + field_varint(2, epoch) +
                         field_varint(3, len(ops)))
        return peer_msg(sender=site, body=field_bytes(11, vv + field_varint(2, now)))

    log("start", mode=mode, site=site, repo=repo, ref=ref, tip=tip,
        epoch=epoch, hlc=hlc, pack_bytes=len(pack), full_pack_bytes=len(full),
        chunk_max=chunk_max, smuggled=xtip, smuggled_pack_bytes=len(xpack))

    # streams: (routing id, stream id) -> state
    streams = {}

    def send(rid, body):
        router.send_multipart([rid, peer_msg(sender=site, body=body)])

    def pump(key):
        st = streams[key]
        rid, sid = key
        pack = st["pack"]
        while st["credit"] > 0 and st["off"] < len(pack):
            data = pack[st["off"]:st["off"] + chunk_max]
            send(rid, field_bytes(18, field_varint(1, sid) + field_varint(2, st["seq"]) +
                                  field_bytes(3, data) + field_varint(4, 0)))
            st["off"] += len(data)
            st["seq"] += 1
            st["credit"] -= 1
            counts["chunks"] += 1
            counts["bytes"] += len(data)
        if st["off"] >= len(pack):
            # like the real server: an empty last chunk, credit or not
            send(rid, field_bytes(18, field_varint(1, sid) + field_varint(2, st["seq"]) +
                                  field_bytes(3, b"") + field_varint(4, 1)))
            counts["chunks"] += 1
            counts["streams_done"] += 1
            log("stream_done", peer=st["peer"], id=sid, chunks=st["seq"] + 1,
                bytes=st["off"], credits=st["credits"])
            del streams[key]

    def on_frame(rid, body):
        try:
            m = pb_fields(body)
        except ValueError as e:
            log("undecodable", why=str(e))
            return
        peer = pb_one(m, 2, b"?").decode(errors="replace")
        if 17 in m:  # pack_req
            q = pb_fields(pb_one(m, 17))
            sid = pb_one(q, 1, 0)
            qrepo = pb_one(q, 2, b"").decode(errors="replace")
            wants = [w.decode(errors="replace") for w in q.get(3, [])]
            haves = [h.decode(errors="replace") for h in q.get(4, [])]
            credit = pb_one(q, 5, 1) or 1
            counts["pack_reqs"] += 1
            log("pack_req", peer=peer, id=sid, repo=qrepo, wants=wants,
                haves=haves, credit=credit)
            ok = {tip, xtip} if phase[0] >= 2 else {tip}
            if qrepo != repo or not wants or any(w not in ok for w in wants):
                counts["refused_reqs"] += 1
                send(rid, field_bytes(20, field_varint(1, sid) + field_bytes(2, "not here")))
                log("pack_err_sent", peer=peer, id=sid, why="not here",
                    wants=wants, phase=phase[0])
                return
            key = (rid, sid)
            what = xpack if phase[0] >= 2 else pack
            streams[key] = {"peer": peer, "off": 0, "seq": 0, "credit": credit,
                            "credits": 0, "pack": what}
            counts["streams"] += 1
            log("stream", peer=peer, id=sid, mode=mode, bytes=len(what),
                wants=wants, phase=phase[0])
            pump(key)
        elif 19 in m:  # pack_credit
            c = pb_fields(pb_one(m, 19))
            key = (rid, pb_one(c, 1, 0))
            n = pb_one(c, 2, 0)
            counts["credits"] += n
            if key in streams:
                streams[key]["credit"] += n
                streams[key]["credits"] += n
                pump(key)
        elif 20 in m:  # pack_err: the asker gives up the stream
            e = pb_fields(pb_one(m, 20))
            sid = pb_one(e, 1, 0)
            why = pb_one(e, 2, b"").decode(errors="replace")
            st = streams.pop((rid, sid), None)
            counts["cancelled"] += 1
            # (a stream already sent whole is cancelled by an asker that
            # found the fault in its middle: the cancel comes after)
            log("cancelled", peer=peer, id=sid, why=why, open=st is not None,
                sent=st["off"] if st else None)
        elif 12 in m:  # range_req
            r = pb_fields(pb_one(m, 12))
            origin = pb_one(r, 1, b"").decode(errors="replace")
            repoch, frm = pb_one(r, 2, 0), pb_one(r, 3, 0)
            counts["range_reqs"] += 1
            rep = b""
            if origin == site and repoch == epoch and 1 <= frm <= len(ops):
                rep = b"".join(field_bytes(3, o) for o in ops[frm - 1:])
            send(rid, field_bytes(13, field_bytes(1, origin) + field_varint(2, repoch) +
                                  rep + field_varint(4, frm)))
            log("range_req", peer=peer, origin=origin, epoch=repoch, frm=frm,
                answered=bool(rep))
        elif 14 in m:  # vv_req
            router.send_multipart([rid, heartbeat()])
        elif 25 in m and attack == "mirror-feed":  # mirror_sub
            counts["published"] += 1
            send(rid, field_bytes(26, feed))
            if counts["published"] == 1:
                log("mirror_sub", answered=victim)

    poller = zmq.Poller()
    poller.register(router, zmq.POLLIN)
    end = time.monotonic() + float(secs)
    next_pub = 0.0
    try:
        while time.monotonic() < end:
            while bumps[0] and mode == "smuggle" and phase[0] < 2:
                bumps[0] -= 1
                phase[0] += 1
                if phase[0] == 1:
                    change2 = (field_bytes(1, smuggled_ref) + field_bytes(2, zeros) +
                               field_bytes(3, xtip))
                    ops.append(sign(field_bytes(1, site) + field_varint(2, epoch) +
                                    field_varint(3, 2) +
                                    field_varint(4, int(time.time() * 1000) << 16) +
                                    field_bytes(17, field_bytes(1, repo) +
                                                field_bytes(2, change2))))
                log("phase", phase=phase[0], ops=len(ops))
                next_pub = 0.0
            t = time.monotonic()
            if t >= next_pub:
                pub.send(heartbeat())
                for o in ops:
                    pub.send(peer_msg(sender=site, body=field_bytes(10, o)))
                    counts["ops_published"] += 1
                next_pub = t + 0.1
            for _ in poller.poll(max(1, int((next_pub - time.monotonic()) * 1000))):
                drain(router, on_frame,
                      lambda n: log("multipart", frames=n))
    finally:
        log("end", **counts)
    return 0


# ---- forge: a peer with a valid key lying about other sites ---------------

def pushlog_hash(e):
    """common/pushlog.c's hash (docs/push-log.md, "The bytes hashed") of
    an entry given as a dict."""
    import hashlib
    import struct

    def s(v):
        v = (v or "").encode()
        return struct.pack(">I", len(v)) + v
    b = s("grantd push log v1") + s(e["origin"]) + struct.pack(">Q", e["n"]) + e["prev"]
    for f in ("user", "key_fp", "key_kind", "client_ip", "factor", "factor_detail", "repo"):
        b += s(e.get(f))
    b += struct.pack(">I", len(e["changes"]))
    for ref, old, new in e["changes"]:
        b += s(ref) + s(old) + s(new)
    b += s(e.get("push_id")) + struct.pack(">Q", e.get("pushed_ms", 0)) + struct.pack(">Q", e["hlc"])
    return hashlib.blake2b(b, digest_size=32).digest()


def pushlog_lies(site, epoch):
    """The six operations of forge pushlog (see the usage), packed, and the
    hashes of the two entries 2, hex."""
    z = "0" * 40
    t0 = int(time.time() * 1000) - 60000

    def entry(n, prev, ms, user, new):
        e = {"origin": site, "n": n, "prev": prev, "user": user, "client_ip": "192.0.2.9",
             "repo": "demo", "changes": [("refs/heads/main", z, new)], "hlc": (t0 + ms) << 16}
        e["hash"] = pushlog_hash(e)
        return e

    def pack(e):
        b = (field_bytes(1, e["origin"]) + field_varint(2, e["n"]) + field_bytes(3, e["prev"]) +
             field_bytes(4, e["hash"]) + field_bytes(5, e["user"]) +
             field_bytes(8, e["client_ip"]) + field_bytes(11, e["repo"]))
        for ref, old, new in e["changes"]:
            b += field_bytes(12, field_bytes(1, ref) + field_bytes(2, old) + field_bytes(3, new))
        return b + field_varint(15, e["hlc"])
    e1 = entry(1, bytes(32), 0, "alice", "1" * 40)
    e2 = entry(2, e1["hash"], 20000, "alice", "2" * 40)
    e2b = entry(2, e1["hash"], 10000, "mallory", "3" * 40)
    e3 = entry(3, e2b["hash"], 5000, "alice", "4" * 40)
    e3w = entry(3, bytes([0xee]) * 32, 30000, "alice", "5" * 40)
    e5 = entry(5, e3w["hash"], 40000, "alice", "6" * 40)
    ops = []
    for seq, e in enumerate((e1, e2, e2b, e3, e3w, e5), 1):
        ops.append(field_bytes(1, site) + field_varint(2, epoch) + field_varint(3, seq) +
                   field_varint(4, e["hlc"]) + field_bytes(19, pack(e)))
    return ops, {"hash2": e2["hash"].hex(), "hash2b": e2b["hash"].hex()}


def forge(ctx, attack, publish, sync, keyfile, site, victim, vepoch, vseq, secs):
    import secrets
    import signal

    attacks = ("live", "snap", "snap-vv", "snap-bare", "snap-wrongkey", "hugevv",
               "pushlog", "range", "mirror-feed", "relay")
    snaps = ("snap", "snap-vv", "snap-bare", "snap-wrongkey")
    if attack not in attacks:
        print("forge: ATTACK is one of " + " ".join(attacks), file=sys.stderr)
        return 2
    vepoch, vseq = int(vepoch, 16), int(vseq)
    counts = {"range_reqs": 0, "snap_reqs": 0, "published": 0, "heartbeats": 0}

    def log(event, **kw):
        print(json.dumps(dict({"event": event}, **kw), sort_keys=True), flush=True)

    def stop(*_):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, stop)
    _, sec = load_keys(keyfile)
    sign, _ = op_signer(keyfile)

    pub = curve_server(ctx, zmq.PUB, publish, sec)
    router = curve_server(ctx, zmq.ROUTER, sync, sec)
    epoch = secrets.randbits(62) + 1
    now_hlc = int(time.time() * 1000) << 16

    def vv_entry(origin, ep, seq):
        return field_bytes(1, field_bytes(1, origin) + field_varint(2, ep) +
                           field_varint(3, seq))

    def grant(net, hlc, origin):
        return (field_bytes(1, "kim") + field_bytes(2, net) + field_bytes(3, "") +
                field_varint(4, int(time.time())) +
                field_varint(5, int(time.time()) + 86400) + field_bytes(6, origin) +
                field_varint(14, hlc) + field_bytes(15, origin))

    own = b""
    if attack == "pushlog":
        own = vv_entry(site, epoch, 6)
    elif attack != "live":
        own = vv_entry(site, epoch, 1)
    if attack == "relay":  # only the claim: nothing of its own to fetch first
        own = vv_entry(victim, vepoch, vseq + 1)
    junk = b""
    if attack == "hugevv":
        junk = b"".join(vv_entry("junk%d" % i, i + 1, 1) for i in range(5000))

    def heartbeat():
        hlc = int(time.time() * 1000) << 16
        return peer_msg(sender=site, body=field_bytes(11, own + junk + field_varint(2, hlc)))

    forged_op = (field_bytes(1, victim) + field_varint(2, vepoch) +
                 field_varint(3, vseq + 1) + field_varint(4, now_hlc) +
                 field_bytes(12, grant("10.66.6.6", now_hlc, victim)))
    range_op = (field_bytes(1, victim) + field_varint(2, vepoch) +
                field_varint(3, vseq + 1) + field_varint(4, now_hlc) +
                field_bytes(12, grant("10.66.6.8", now_hlc, victim)))
    pushlog_ops, hashes = pushlog_lies(site, epoch)
    pushlog_ops = [sign(o) for o in pushlog_ops]
    relay_op = (field_bytes(1, victim) + field_varint(2, vepoch) +
                field_varint(3, vseq + 1) + field_varint(4, now_hlc) +
                field_bytes(12, grant("10.66.6.9", now_hlc, victim)))
    relay_ops = [relay_op, sign(relay_op)]
    # snap-bare, snap-wrongkey: one plausible record of VICTIM's (a grant
    # stamped now) in the grants family, with no operations or with one
    # signed by SITE
    xfer_net = "127.0.7.8" if attack == "snap-bare" else "127.0.7.9"
    xfer_grant = grant(xfer_net, now_hlc, victim)
    xfer_ops = b""
    if attack == "snap-wrongkey":
        xfer_ops = field_bytes(1, sign(field_bytes(1, victim) + field_varint(2, vepoch) +
                                       field_varint(3, vseq + 1) + field_varint(4, now_hlc) +
                                       field_bytes(12, xfer_grant)))
    asked = {}  # relay: range requests for VICTIM, by asker
    feed_op = (field_bytes(1, victim) + field_varint(2, vepoch) +
               field_varint(3, vseq + 1) + field_varint(4, now_hlc) +
               field_bytes(10, field_bytes(1, "forged-feed") + field_varint(14, now_hlc) +
                           field_bytes(15, victim)))
    feed = field_bytes(1, field_bytes(1, victim) + field_varint(2, vepoch) +
                       field_varint(3, vseq + 1) + field_varint(4, now_hlc) +
                       field_bytes(5, feed_op))
    log("start", attack=attack, site=site, epoch=epoch, victim=victim,
        vepoch="%016x" % vepoch, vseq=vseq, heartbeat_entries=(1 if own else 0) +
        (5000 if junk else 0), **hashes)

    def send(rid, body):
        router.send_multipart([rid, peer_msg(sender=site, body=body)])

    def on_frame(rid, body):
        try:
            m = pb_fields(body)
        except ValueError as e:
            log("undecodable", why=str(e))
            return
        if 12 in m:  # range_req: answered truncated (snap) or empty
            r = pb_fields(pb_one(m, 12))
            origin = pb_one(r, 1, b"").decode(errors="replace")
            repoch, frm = pb_one(r, 2, 0), pb_one(r, 3, 0)
            counts["range_reqs"] += 1
            trunc = attack in snaps
            if attack == "relay" and origin == victim and repoch == vepoch:
                # in turn for each asker (the victim itself may ask too)
                asked[rid] = asked.get(rid, 0) + 1
                signed = asked[rid] % 2 == 0
                send(rid, field_bytes(13, field_bytes(1, victim) + field_varint(2, vepoch) +
                                      field_bytes(3, relay_ops[signed]) +
                                      field_varint(4, vseq + 1)))
                log("range_req", origin=origin, epoch=repoch, frm=frm, relayed=victim,
                    signed_by_site=signed)
                return
            if attack == "range":  # another origin's operations
                send(rid, field_bytes(13, field_bytes(1, victim) + field_varint(2, vepoch) +
                                      field_bytes(3, range_op) + field_varint(4, vseq + 1)))
                log("range_req", origin=origin, epoch=repoch, frm=frm, answered=victim)
                return
            if attack == "pushlog" and repoch == epoch and origin == site:
                send(rid, field_bytes(13, field_bytes(1, origin) + field_varint(2, repoch) +
                                      b"".join(field_bytes(3, o)
                                               for o in pushlog_ops[max(frm, 1) - 1:]) +
                                      field_varint(4, frm)))
                log("range_req", origin=origin, epoch=repoch, frm=frm)
                return
            send(rid, field_bytes(13, field_bytes(1, origin) + field_varint(2, repoch) +
                                  field_varint(4, frm) + field_varint(5, int(trunc))))
            log("range_req", origin=origin, epoch=repoch, frm=frm, truncated=trunc)
        elif 15 in m:  # snap_req
            q = pb_fields(pb_one(m, 15))
            cf = pb_one(q, 1, 0)
            first = 2 not in q
            counts["snap_reqs"] += 1
            rep = field_varint(1, cf) + field_varint(4, 1)
            sent = None
            if first and cf == 1:
                rep += field_bytes(5, field_bytes(1, site) + field_varint(2, epoch) +
                                   field_varint(3, 1))
                if attack in ("snap", "snap-vv"):
                    rep += field_bytes(5, field_bytes(1, victim) + field_varint(2, vepoch) +
                                       field_varint(3, 1 << 62))
            if attack == "snap" and cf == 3:  # CF_GRANTS
                rep += (field_bytes(2, b"kim\x0010.66.6.7\x00") +
                        field_bytes(3, grant("10.66.6.7", (1 << 64) - (1 << 16), site)))
            if attack in ("snap-bare", "snap-wrongkey") and cf == 3 and first:
                rep += (field_bytes(2, b"kim\x00" + xfer_net.encode() + b"\x00") +
                        field_bytes(3, xfer_grant) + field_bytes(6, xfer_ops))
                sent = {"net": xfer_net, "origin": victim, "ops": 1 if xfer_ops else 0}
            send(rid, field_bytes(16, rep))
            if sent:
                log("snap_req", cf=cf, first=first, sent=sent)
            else:
                log("snap_req", cf=cf, first=first)
        elif 14 in m:  # vv_req
            router.send_multipart([rid, heartbeat()])
        elif 25 in m and attack == "mirror-feed":  # mirror_sub
            counts["published"] += 1
            send(rid, field_bytes(26, feed))
            if counts["published"] == 1:
                log("mirror_sub", answered=victim)

    poller = zmq.Poller()
    poller.register(router, zmq.POLLIN)
    end = time.monotonic() + float(secs)
    next_pub = 0.0
    try:
        while time.monotonic() < end:
            t = time.monotonic()
            if t >= next_pub:
                pub.send(heartbeat())
                counts["heartbeats"] += 1
                if attack == "live":
                    pub.send(peer_msg(sender=site, body=field_bytes(10, forged_op)))
                    counts["published"] += 1
                if attack == "pushlog":
                    for o in pushlog_ops:
                        pub.send(peer_msg(sender=site, body=field_bytes(10, o)))
                    counts["published"] += len(pushlog_ops)
                next_pub = t + 0.1
            for _ in poller.poll(max(1, int((next_pub - time.monotonic()) * 1000))):
                drain(router, on_frame)
    finally:
        log("end", **counts)
    return 0


def main(argv):
    ctx = zmq.Context()
    mode = argv[1]
    if mode == "unknown-key":
        publish, sync, server_key, wait_s = argv[2], argv[3], argv[4], float(argv[5])
        n_sub, n_dealer = probe(ctx, publish, sync, server_key, None, wait_s, False)
        return 0 if n_sub == 0 and n_dealer == 0 else 1
    if mode == "plain":
        publish, sync, wait_s = argv[2], argv[3], float(argv[4])
        n_sub, n_dealer = probe(ctx, publish, sync, None, None, wait_s, False)
        return 0 if n_sub == 0 and n_dealer == 0 else 1
    if mode == "peer":
        publish, sync, server_key, keyfile, wait_s = argv[2:7]
        n_sub, n_dealer = probe(ctx, publish, sync, server_key,
                                load_keys(keyfile), float(wait_s), True)
        return 0 if n_sub > 0 and n_dealer > 0 else 1
    if mode == "mirror":
        publish, sync, server_key, keyfile, site, wait_s = argv[2:8]
        keys = load_keys(keyfile)
        sub = sock(ctx, zmq.SUB, publish, server_key, keys)
        dealer = sock(ctx, zmq.DEALER, sync, server_key, keys)
        dealer.send(peer_msg(sender=site, body=VV_REQ))
        n_sub, n_dealer = listen([sub, dealer], float(wait_s),
                                 stop_at_first=False)
        print(json.dumps({"sub_received": n_sub,
                          "dealer_received": n_dealer}))
        return 0 if n_sub == 0 and n_dealer > 0 else 1
    if mode == "ask-range":
        # as SITE (KEYFILE's key), ask the node at SYNC for ORIGIN's
        # operations of EPOCH (hex) from FROM on; print the reply
        sync, server_key, keyfile, site, origin, epoch, frm, wait_s = argv[2:10]
        dealer = sock(ctx, zmq.DEALER, sync, server_key, load_keys(keyfile))
        req = (field_bytes(1, origin) + field_varint(2, int(epoch, 16)) +
               field_varint(3, int(frm)) + field_varint(4, 1000))
        dealer.send(peer_msg(sender=site, body=field_bytes(12, req)))
        if not dealer.poll(int(float(wait_s) * 1000)):
            print(json.dumps({"answered": False}))
            return 1
        rep = pb_fields(pb_one(pb_fields(dealer.recv()), 13, b""))
        print(json.dumps({"answered": True, "ops": len(rep.get(3, [])),
                          "truncated": bool(pb_one(rep, 5, 0)),
                          "retired": bool(pb_one(rep, 6, 0))}))
        return 0
    if mode == "garbage":
        sync, server_key, keyfile, count, seed = argv[2:7]
        rnd = random.Random(int(seed))
        dealer = sock(ctx, zmq.DEALER, sync, server_key, load_keys(keyfile))
        sent = 0
        crafted = [
            b"",                                             # no version
            peer_msg(version=PEER_VERSION + 1, body=VV_REQ), # bad version
            peer_msg(version=None, body=VV_REQ),
            peer_msg(sender="montreal", body=VV_REQ),        # not its key
            peer_msg(sender="no such site", body=VV_REQ),
            peer_msg(sender=None, body=VV_REQ),
            # range_req (12): bad origin names, from = 0
            peer_msg(body=field_bytes(12, field_bytes(1, "../../etc") +
                                      field_varint(3, 1))),
            peer_msg(body=field_bytes(12, field_bytes(1, "paloalto") +
                                      field_varint(3, 0))),
            peer_msg(body=field_bytes(12, field_varint(3, 1))),
            # snap_req (15): an unknown column family, a huge `after`
            peer_msg(body=field_bytes(15, field_varint(1, 999))),
            peer_msg(body=field_bytes(15, field_varint(1, 0) +
                                      field_bytes(2, b"x" * 5000))),
            # bodies a sync endpoint does not take: op (10), heartbeat
            # (11), range_rep (13), snap_rep (16)
            peer_msg(body=field_bytes(10, field_bytes(1, "portland") +
                                      field_varint(2, 1) + field_varint(3, 1))),
            peer_msg(body=field_bytes(11, b"")),
            peer_msg(body=field_bytes(13, b"")),
            peer_msg(body=field_bytes(16, b"")),
            # truncated and over-long framing
            peer_msg(body=VV_REQ)[:-1] + b"\xff",
            b"\x12\xff\xff\xff\xff\x0f",
        ]
        for frame in crafted:
            dealer.send(frame)
            sent += 1
        for _ in range(int(count)):
            n = rnd.choice([1, 2, 7, 64, 300, 2000, rnd.randrange(1, 60000)])
            dealer.send(bytes(rnd.getrandbits(8) for _ in range(n)))
            sent += 1
        for _ in range(5):  # multi-frame messages: one drop each
            dealer.send_multipart([b"a" * rnd.randrange(1, 100),
                                   peer_msg(body=VV_REQ), b"z"])
            sent += 1
        n_back = listen([dealer], 1.0)[0]
        # Last, one frame over the endpoint's size limit (ZMQ_MAXMSGSIZE):
        # libzmq drops the connection, the node never sees the frame.
        dealer.setsockopt(zmq.LINGER, 1000)
        dealer.send(b"\x08\x01" + b"x" * 200000)
        dealer.close()
        print(json.dumps({"sent": sent, "answered": n_back}))
        return 0 if n_back == 0 else 1
    if mode == "fake-pub":
        endpoint, keyfile, site, seed, secs = argv[2:7]
        rnd = random.Random(int(seed))
        _, sec = load_keys(keyfile)
        pub = ctx.socket(zmq.PUB)
        pub.setsockopt(zmq.LINGER, 0)
        pub.setsockopt(zmq.CURVE_SERVER, 1)
        pub.setsockopt(zmq.CURVE_SECRETKEY, sec)
        pub.bind(endpoint)
        hlc = int(time.time() * 1000) << 16
        def op(origin, user, epoch=7, seq=1):
            rec = field_bytes(1, user) + field_varint(14, hlc) + \
                field_bytes(15, origin)
            return field_bytes(1, origin) + field_varint(2, epoch) + \
                field_varint(3, seq) + field_varint(4, hlc) + \
                field_bytes(10, rec)
        bad = [
            # an operation from a site no node is configured with
            peer_msg(sender=site, body=field_bytes(10, op("nosuchsite", "mallory"))),
            # a bad user name, a zero sequence number
            peer_msg(sender=site, body=field_bytes(10, op(site, "B@D", seq=1))),
            peer_msg(sender=site, body=field_bytes(10, op(site, "mallory2", seq=0))),
            # not from the site of this link; another protocol version
            peer_msg(sender="nosuchsite", body=field_bytes(10, op(site, "mallory3"))),
            peer_msg(version=PEER_VERSION + 1, sender=site, body=field_bytes(10, op(site, "mallory4"))),
        ]
        bad += [bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 3000)))
                for _ in range(20)]
        print(json.dumps({"per_round": len(bad) + 1}), flush=True)
        end = time.monotonic() + float(secs)
        rounds = 0
        while time.monotonic() < end:
            for frame in bad:
                pub.send(frame)
            pub.send_multipart([b"x", b"y"])
            rounds += 1
            time.sleep(0.05)  # a round every 50 ms until killed
        return 0
    if mode == "heads":
        endpoint, keyfile, site, origin, n, hexhash, secs = argv[2:9]
        _, sec = load_keys(keyfile)
        pub = curve_server(ctx, zmq.PUB, endpoint, sec)
        heads = field_bytes(1, field_bytes(1, origin) + field_varint(2, int(n)) +
                            field_bytes(3, bytes.fromhex(hexhash)))
        print(json.dumps({"event": "start", "site": site}), flush=True)
        end = time.monotonic() + float(secs)
        while time.monotonic() < end:
            hlc = int(time.time() * 1000) << 16
            pub.send(peer_msg(sender=site, body=field_bytes(11, field_varint(2, hlc))))
            pub.send(peer_msg(sender=site, body=field_bytes(27, heads)))
            time.sleep(0.1)
        return 0
    if mode == "forge-ckpt":
        return forge_ckpt(ctx, *argv[2:8])
    if mode == "forge":
        return forge(ctx, *argv[2:12])
    if mode == "rogue-git":
        return rogue_git(ctx, *argv[2:11])
    print("unknown mode " + mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
