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


def peer_msg(version=1, sender="portland", body=b""):
    """A grantd.v1.PeerMsg (proto/grantd.proto) by hand: version = 1,
    from = 2, sent_us = 3, bodies 10..16."""
    m = b""
    if version is not None:
        m += field_varint(1, version)
    if sender is not None:
        m += field_bytes(2, sender)
    m += field_varint(3, int(time.time() * 1e6))
    return m + body


VV_REQ = field_varint(14, 1)


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
    if mode == "garbage":
        sync, server_key, keyfile, count, seed = argv[2:7]
        rnd = random.Random(int(seed))
        dealer = sock(ctx, zmq.DEALER, sync, server_key, load_keys(keyfile))
        sent = 0
        crafted = [
            b"",                                             # no version
            peer_msg(version=2, body=VV_REQ),                # bad version
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
            peer_msg(version=2, sender=site, body=field_bytes(10, op(site, "mallory4"))),
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
    print("unknown mode " + mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
