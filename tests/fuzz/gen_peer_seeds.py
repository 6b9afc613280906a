#!/usr/bin/env python3
"""gen_peer_seeds.py: write the seed corpus of fuzz_peer_msg.

Each seed is one grantd.v1.PeerMsg (proto/grantd.proto) as portland sends
it to paloalto: a live operation of every body, a heartbeat, a range reply
carrying packed operations, a snapshot reply of every family the state
transfer sends, and the request bodies; then shapes the node must refuse.
Encoded by hand (tests/lib/pbwire.py), so no protobuf package is needed.
Run it from anywhere; it rewrites tests/fuzz/corpus/peer_msg/.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pbwire import field_bytes, field_varint  # noqa: E402
from records_table import families  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "peer_msg")

SITE = "portland"
HLC = 1764770000000 << 16          # a plausible stamp: ms << 16 logical bits
OID_A = "1" * 40
OID_B = "2" * 40
ZERO = "0" * 40
KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9"
       "okWi0dh2l9GKJl alice@example")

# enum store_cf numbers of the families a snapshot carries, from the record
# table (node/state/records.h): never copied here (check_seeds.py)
_CF = families()
CF_USERS, CF_ENROLL, CF_GRANTS, CF_MARKS, CF_FAILS = (
    _CF["USERS"], _CF["ENROLL"], _CF["GRANTS"], _CF["MARKS"], _CF["FAILS"])
CF_UNLOCK, CF_REPOS, CF_REFS, CF_REVOKES = (
    _CF["UNLOCK"], _CF["REPOS"], _CF["REFS"], _CF["REVOKES"])
CF_PUSHLOG = _CF["PUSHLOG"]
CF_TLEAVES = _CF["TLEAVES"]


def stamped(body, hlc=HLC, origin=SITE):
    """A record: the body with its writer's stamp (fields 14, 15)."""
    return body + field_varint(14, hlc) + field_bytes(15, origin)


def user(name="alice", keys=(KEY,), deleted=False):
    m = field_bytes(1, name)
    for k in keys:
        m += field_bytes(2, k)
    if deleted:
        m += field_varint(3, 1)
    return m


def enrollment(name="alice", kind=1, digits=6, period=30):
    return (field_bytes(1, name) + field_varint(2, kind) +
            field_bytes(3, bytes(range(20))) + field_varint(4, digits) +
            (field_varint(5, period) if kind == 1 else field_varint(6, 5)) +
            field_bytes(7, b"\x01" * 32) + field_varint(8, 1) +
            field_varint(10, HLC - 5))


def grant(name="alice", net="192.0.2.7", session=None, revoked=False):
    m = (field_bytes(1, name) + field_bytes(2, net) +
         field_varint(4, 1764770000) + field_varint(5, 1764770000 + 86400) +
         field_bytes(6, SITE))
    if session is not None:
        m += field_bytes(3, session)
    if revoked:
        m += field_varint(7, 1)
    return m


def mark(name="alice"):
    return (field_bytes(1, name) + field_varint(2, HLC - 5) +
            field_varint(3, 57) + field_varint(4, 3))


def failures(name="alice", site=SITE, at=(1764770000000 << 16, (1764770000000 << 16) + 1)):
    """Failures: each attempt named by its operation's HLC stamp (field 4)."""
    m = field_bytes(1, name) + field_bytes(2, site)
    for t in at:
        m += field_varint(4, t)
    return m


def named(name="alice"):
    """Unlock and Revocation: a user name (and the stamp)."""
    return field_bytes(1, name)


def repo(name="pub/linux", mode=2, writers=("alice",), fork_of=None):
    m = field_bytes(1, name) + field_varint(2, mode)
    for w in writers:
        m += field_bytes(3, w)
    if fork_of:
        m += field_bytes(4, fork_of)
    return m


def ref(name="pub/linux", refname="refs/heads/main", target=OID_A):
    return field_bytes(1, name) + field_bytes(2, refname) + field_bytes(3, target)


def ref_update(name="pub/linux", changes=(("refs/heads/main", ZERO, OID_A),)):
    m = field_bytes(1, name)
    for r, old, new in changes:
        m += field_bytes(2, field_bytes(1, r) + field_bytes(2, old) +
                         field_bytes(3, new))
    return m


def push_log_entry(n=1, origin=SITE, hlc=HLC, user="alice"):
    """A PushLogEntry; its hashes are not checked on receipt (log verify
    judges them), so any 32 bytes do."""
    return (field_bytes(1, origin) + field_varint(2, n) +
            field_bytes(3, b"\0" * 32) + field_bytes(4, b"\x42" * 32) +
            field_bytes(5, user) +
            field_bytes(6, "SHA256:ieGENRwGkZ2ZJH/wEtzcd6QlCZ434+NMQvA0N15Murs") +
            field_bytes(7, "plain") + field_bytes(8, "192.0.2.7") +
            field_bytes(9, "grant") + field_bytes(11, "pub/linux") +
            field_bytes(12, field_bytes(1, "refs/heads/main") +
                        field_bytes(2, ZERO) + field_bytes(3, OID_A)) +
            field_varint(14, 1764770000000) + field_varint(15, hlc))


# Op body field numbers (proto Op oneof body)
B_USER, B_ENROLL, B_GRANT, B_MARK, B_FAILURE = 10, 11, 12, 13, 14
B_UNLOCK, B_REPO, B_REFS, B_REVOKE, B_PUSH_LOG = 15, 16, 17, 18, 19
B_PUSH_LEAF = 21


def leaf_text(origin=SITE, index=0, user="alice"):
    """A transparency log leaf's text (common/pushleaf.h)."""
    return ("grantd push v1\norigin %s\nindex %d\ntime 1764770000000\n"
            "repo demo\nuser %s\nkey -\nkind plain\nfactor grant\n"
            "addr UjjYpT5UGZc2QHsfGhq06OY0Dau9mfUyjRoLvfFfUqk=\n"
            "ref refs/heads/main %s %s\n" % (origin, index, user, ZERO, OID_A))


def push_leaf(origin=SITE, index=0, text=None):
    """A PushLeaf (issue 21): origin, index, text."""
    if text is None:
        text = leaf_text(origin, index)
    return field_bytes(1, origin) + field_varint(2, index) + field_bytes(3, text)


def op(num, body, seq=1, origin=SITE, epoch=7, hlc=HLC):
    """An Op; LWW bodies carry the op's own stamp as the record's."""
    if num in (B_USER, B_ENROLL, B_GRANT, B_UNLOCK, B_REPO, B_REVOKE):
        body = stamped(body, hlc, origin)
    return (field_bytes(1, origin) + field_varint(2, epoch) +
            field_varint(3, seq) + field_varint(4, hlc) +
            field_bytes(num, body))


# GD_PEER_VERSION of node/peers/peer.h
PEER_VERSION = 2


def peer_head(version=PEER_VERSION, sender=SITE):
    m = b""
    if version is not None:
        m += field_varint(1, version)
    if sender is not None:
        m += field_bytes(2, sender)
    return m + field_varint(3, 1764770000000000)


def peer_msg(body_num, body, version=PEER_VERSION, sender=SITE):
    return peer_head(version, sender) + field_bytes(body_num, body)


def vv_entry(origin, epoch, seq):
    return field_bytes(1, origin) + field_varint(2, epoch) + field_varint(3, seq)


def snap(cf, records, vv=(), done=True):
    m = field_varint(1, cf)
    for i, r in enumerate(records):
        m += field_bytes(2, "key%d" % i) + field_bytes(3, r)
    if done:
        m += field_varint(4, 1)
    for e in vv:
        m += field_bytes(5, vv_entry(*e))
    return m


# PeerMsg body field numbers
P_OP, P_HEARTBEAT, P_RANGE_REQ, P_RANGE_REP, P_VV_REQ = 10, 11, 12, 13, 14
P_SNAP_REQ, P_SNAP_REP, P_PACK_REQ, P_PACK_CHUNK = 15, 16, 17, 18
P_VOTE_REQ, P_VOTE_REP, P_USE_SYNC_REQ, P_USE_SYNC_REP = 21, 22, 23, 24


def vote_req(pid=0x1234, name="alice", enroll_id=9, kind=2, next_=6, scratch=None):
    m = field_varint(1, pid) + field_bytes(2, name) + field_varint(3, enroll_id)
    m += field_varint(4, kind)
    if next_ is not None:
        m += field_varint(5, next_)
    if scratch is not None:
        m += field_varint(6, scratch)
    return m + field_varint(7, HLC)


def mark_key(name="alice", enroll_id=9):
    return name.encode() + b"\0" + enroll_id.to_bytes(8, "big")


P_MIRROR_SUB, P_MIRROR_OPS = 25, 26


def mirror_op(origin, epoch, seq, hlc=HLC, packed=None):
    """A MirrorOp: the stamp, and the packed Op when a mirror may hold it."""
    m = (field_bytes(1, origin) + field_varint(2, epoch) +
         field_varint(3, seq) + field_varint(4, hlc))
    return m + (field_bytes(5, packed) if packed is not None else b"")


def mirror_ops(entries, range_from=None, origin=SITE, epoch=7, truncated=False):
    m = b"".join(field_bytes(1, e) for e in entries)
    if range_from is not None:
        m += (field_varint(2, 1) + field_bytes(3, origin) +
              field_varint(4, epoch) + field_varint(5, range_from))
        if truncated:
            m += field_varint(6, 1)
    return m

SEEDS = {
    "op_user": peer_msg(P_OP, op(B_USER, user())),
    "op_user_deleted": peer_msg(P_OP, op(B_USER, user(keys=(), deleted=True))),
    "op_enroll_totp": peer_msg(P_OP, op(B_ENROLL, enrollment())),
    "op_enroll_hotp": peer_msg(P_OP, op(B_ENROLL, enrollment(kind=2, digits=8))),
    "op_grant": peer_msg(P_OP, op(B_GRANT, grant())),
    "op_grant_subnet_session": peer_msg(P_OP, op(B_GRANT, grant(
        net="2001:db8::/48", session="52311/4"))),
    "op_mark": peer_msg(P_OP, op(B_MARK, mark())),
    "op_failure": peer_msg(P_OP, op(B_FAILURE, failures())),
    "op_unlock": peer_msg(P_OP, op(B_UNLOCK, named())),
    "op_revoke": peer_msg(P_OP, op(B_REVOKE, named())),
    "op_repo": peer_msg(P_OP, op(B_REPO, repo())),
    "op_repo_fork": peer_msg(P_OP, op(B_REPO, repo(name="pub/linux-fork",
                                                    fork_of="pub/linux"))),
    "op_refs": peer_msg(P_OP, op(B_REFS, ref_update(changes=(
        ("refs/heads/main", OID_A, OID_B), ("refs/tags/v1", ZERO, OID_A),
        ("refs/heads/old", OID_B, ZERO))))),
    "op_push_log": peer_msg(P_OP, op(B_PUSH_LOG, push_log_entry())),
    "op_push_log_other_origin": peer_msg(P_OP, op(B_PUSH_LOG, push_log_entry(
        origin="montreal"))),
    "op_push_leaf": peer_msg(P_OP, op(B_PUSH_LEAF, push_leaf())),
    "op_push_leaf_bad_text": peer_msg(P_OP, op(B_PUSH_LEAF, push_leaf(
        text=leaf_text(index=1)))),
    "heartbeat": peer_msg(P_HEARTBEAT, field_bytes(1, vv_entry(SITE, 7, 12)) +
                          field_bytes(1, vv_entry("montreal", 3, 40)) +
                          field_varint(2, HLC) + field_bytes(3, b"\x5a" * 32) +
                          field_varint(4, 0)),
    "range_rep": peer_msg(P_RANGE_REP, field_bytes(1, SITE) + field_varint(2, 7) +
                          field_bytes(3, op(B_USER, user(), seq=1)) +
                          field_bytes(3, op(B_GRANT, grant(), seq=2)) +
                          field_bytes(3, op(B_MARK, mark(), seq=3)) +
                          field_varint(4, 1)),
    "range_rep_truncated": peer_msg(P_RANGE_REP, field_bytes(1, SITE) +
                                    field_varint(2, 7) + field_varint(4, 9) +
                                    field_varint(5, 1)),
    "snap_users": peer_msg(P_SNAP_REP, snap(CF_USERS, [
        stamped(user()), stamped(user("bob", keys=()), HLC + 1, "montreal")],
        vv=[(SITE, 7, 12), ("montreal", 3, 40)], done=False)),
    "snap_enroll": peer_msg(P_SNAP_REP, snap(CF_ENROLL, [stamped(enrollment())])),
    "snap_grants": peer_msg(P_SNAP_REP, snap(CF_GRANTS, [
        stamped(grant()), stamped(grant(net="192.0.2.0/24", revoked=True))])),
    "snap_marks": peer_msg(P_SNAP_REP, snap(CF_MARKS, [mark()])),
    "snap_fails": peer_msg(P_SNAP_REP, snap(CF_FAILS, [failures(),
                                                        failures(site="montreal")])),
    "snap_unlock": peer_msg(P_SNAP_REP, snap(CF_UNLOCK, [stamped(named())])),
    "snap_repos": peer_msg(P_SNAP_REP, snap(CF_REPOS, [stamped(repo())])),
    "snap_refs": peer_msg(P_SNAP_REP, snap(CF_REFS, [stamped(ref())])),
    "snap_revokes": peer_msg(P_SNAP_REP, snap(CF_REVOKES, [stamped(named())])),
    "snap_pushlog": peer_msg(P_SNAP_REP, snap(CF_PUSHLOG, [
        push_log_entry(), push_log_entry(n=2, hlc=HLC + 1, user="bob")])),
    "snap_tleaves": peer_msg(P_SNAP_REP, snap(CF_TLEAVES, [
        push_leaf(), push_leaf(index=1), push_leaf(index=1, text=leaf_text(
            index=1, user="bob"))])),
    "range_req": peer_msg(P_RANGE_REQ, field_bytes(1, SITE) + field_varint(2, 7) +
                          field_varint(3, 1) + field_varint(4, 100)),
    "vv_req": peer_head() + field_varint(P_VV_REQ, 1),
    "snap_req": peer_msg(P_SNAP_REQ, field_varint(1, CF_USERS) + field_bytes(2, "alice")),
    # PeerMsg body 27: the push log heads a peer publishes (plheads.h)
    "pushlog_heads": peer_msg(27, field_bytes(1, field_bytes(1, SITE) + field_varint(2, 3) +
                                              field_bytes(3, b"\xab" * 32)) +
                              field_bytes(1, field_bytes(1, "paloalto") + field_varint(2, 1) +
                                          field_bytes(3, b"\x01" * 31))),
    # PeerMsg bodies 28, 29: the transparency log's checkpoint and a
    # cosignature (node/peers/tlogwit.h), as a frontend publishes them
    "checkpoint": peer_msg(28, field_bytes(1,
        "localhost/grantd/portland\n3\nq1Wq0Qv6dXbGJtsa4dTmEcFhN1pvGbHWzXk0FH2HqYw=\n\n"
        "\u2014 localhost/grantd/portland AAAAAAAA\n")),
    "cosig": peer_msg(29, field_bytes(1, "paloalto") + field_varint(2, 3) +
                      field_bytes(3, "\u2014 localhost/grantd/portland AAAAAAAA\n")),
    # bodies 30, 31: a mirror asks a frontend for its checkpoints
    "ckpt_req": peer_head() + field_varint(30, 1),
    "ckpt_rep": peer_msg(31, field_bytes(1,
        "localhost/grantd/paloalto\n1\nq1Wq0Qv6dXbGJtsa4dTmEcFhN1pvGbHWzXk0FH2HqYw=\n\n"
        "\u2014 localhost/grantd/paloalto AAAAAAAA\n")),
    "pack_req": peer_msg(P_PACK_REQ, field_varint(1, 1) + field_bytes(2, "pub/linux") +
                         field_bytes(3, OID_A) + field_bytes(4, OID_B) +
                         field_varint(5, 4)),
    # the token quorum (vote.h): proposals, answers, use sync pages
    "vote_req_hotp": peer_msg(P_VOTE_REQ, vote_req()),
    "vote_req_scratch": peer_msg(P_VOTE_REQ, vote_req(next_=None, scratch=4)),
    "vote_req_two_bits": peer_msg(P_VOTE_REQ, vote_req(next_=None, scratch=3)),
    "vote_req_no_pid": peer_msg(P_VOTE_REQ, vote_req(pid=0)),
    "vote_req_long_user": peer_msg(P_VOTE_REQ, vote_req(name="a" * 300)),
    "vote_rep_yes": peer_msg(P_VOTE_REP, field_varint(1, 0x1234) + field_varint(2, 1) +
                             field_varint(4, 3)),
    "vote_rep_used": peer_msg(P_VOTE_REP, field_varint(1, 0x1234) + field_varint(2, 2) +
                              field_varint(3, 40)),
    "use_sync_req": peer_msg(P_USE_SYNC_REQ, field_bytes(1, mark_key()) + field_varint(2, 256)),
    "use_sync_rep": peer_msg(P_USE_SYNC_REP, field_bytes(1, mark_key()) +
                             field_bytes(2, mark()) + field_bytes(1, mark_key("bob", 2)) +
                             field_bytes(2, mark("bob")) + field_varint(3, 1) +
                             field_varint(4, 1) + field_varint(5, 12)),
    "use_sync_rep_bad_key": peer_msg(P_USE_SYNC_REP, field_bytes(1, b"nokey") +
                                     field_bytes(2, mark()) + field_varint(3, 0)),
    # A mirror's feed (issue 12): its subscription, a live feed with a
    # visible operation and two hidden ones as stamps, a range answer with
    # a relayed origin, a truncated one.
    "mirror_sub": peer_msg(P_MIRROR_SUB, field_bytes(1, vv_entry(SITE, 7, 12)) +
                           field_bytes(1, vv_entry("montreal", 3, 40)) +
                           field_bytes(2, b"\x33" * 32)),
    "mirror_ops_live": peer_msg(P_MIRROR_OPS, mirror_ops([
        mirror_op(SITE, 7, 1, packed=op(B_USER, user(), seq=1)),
        mirror_op(SITE, 7, 2, hlc=HLC + 1),
        mirror_op(SITE, 7, 3, hlc=HLC + 2),
        mirror_op(SITE, 7, 4, hlc=HLC + 3, packed=op(B_REPO, repo(), seq=4,
                                                      hlc=HLC + 3))])),
    "mirror_ops_range": peer_msg(P_MIRROR_OPS, mirror_ops([
        mirror_op("montreal", 3, 1, packed=op(B_USER, user("bob", keys=()),
                                               seq=1, origin="montreal", epoch=3)),
        mirror_op("montreal", 3, 2),
        mirror_op("montreal", 3, 3, packed=op(B_REFS, ref_update(), seq=3,
                                               origin="montreal", epoch=3))],
        range_from=1, origin="montreal", epoch=3)),
    "mirror_ops_truncated": peer_msg(P_MIRROR_OPS, mirror_ops([], range_from=9,
                                                              truncated=True)),
    # ... and feed shapes a mirror must refuse: a hidden body sent whole, a
    # stamp that is not its op's, seq 0.
    "mirror_ops_hidden_whole": peer_msg(P_MIRROR_OPS, mirror_ops([
        mirror_op(SITE, 7, 1, packed=op(B_ENROLL, enrollment(), seq=1))])),
    "mirror_ops_stamp_lies": peer_msg(P_MIRROR_OPS, mirror_ops([
        mirror_op(SITE, 7, 5, packed=op(B_USER, user(), seq=1))])),
    "mirror_ops_seq_0": peer_msg(P_MIRROR_OPS, mirror_ops([mirror_op(SITE, 7, 0)])),
    # Shapes the node must refuse: another version, no version, a sender
    # that is not the link's site, an op whose origin lies about its stamp.
    "version_other": peer_msg(P_OP, op(B_USER, user()), version=PEER_VERSION + 1),
    "no_version": peer_msg(P_OP, op(B_USER, user()), version=None),
    "other_sender": peer_msg(P_OP, op(B_USER, user()), sender="montreal"),
    "op_seq_0": peer_msg(P_OP, op(B_USER, user(), seq=0)),
    "op_bad_user": peer_msg(P_OP, op(B_USER, user(name="B@D"))),
    "snap_future_stamp": peer_msg(P_SNAP_REP, snap(CF_GRANTS, [
        stamped(grant(), hlc=(1 << 64) - 1)], vv=[("montreal", 3, 1 << 62)])),
}


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
