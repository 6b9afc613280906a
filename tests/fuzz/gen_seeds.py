#!/usr/bin/env python3
"""gen_seeds.py: write the seed corpus of fuzz_control_request.

Each seed is one grantd.v1.Request (proto/grantd.proto) as a client sends it,
encoded by hand so no protobuf package is needed.  Run it from anywhere; it
rewrites tests/fuzz/corpus/control_request/.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from pbwire import field_bytes, field_varint  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "control_request")


def request(cmd, args=(), user=None, client_ip=None, session=None,
            json=None, version=1):
    m = b""
    if version is not None:
        m += field_varint(1, version)
    m += field_bytes(2, cmd)
    for a in args:
        m += field_bytes(3, a)
    if user is not None:
        m += field_bytes(4, user)
    if client_ip is not None:
        m += field_bytes(5, client_ip)
    if session is not None:
        m += field_bytes(6, session)
    if json is not None:
        m += field_varint(7, 1 if json else 0)
    return m


SEEDS = {
    "val": request("2fa.val", ["123456"], user="alice",
                   client_ip="192.0.2.7"),
    "val_for_days": request("2fa.val-for-days", ["7", "123456"],
                            user="alice", client_ip="2001:db8::7"),
    "val_subnet": request("2fa.val-subnet", ["/24", "12345678"],
                          user="alice", client_ip="::ffff:192.0.2.7"),
    "val_session": request("2fa.val-session", ["123456"], user="bob",
                           client_ip="192.0.2.8", session="52311/4"),
    "isval": request("2fa.isval", user="alice", client_ip="192.0.2.7"),
    "push_check": request("push.check", ["~/pub/scm/linux.git"],
                          user="alice", client_ip="192.0.2.7",
                          session="52311/4"),
    "admin_check": request("check", ["alice", "192.0.2.7",
                                     "pub/scm/linux/kernel/git/torvalds/linux"]),
    "inval_all_purge": request("2fa.inval", ["all", "purge"], user="alice",
                               client_ip="2001:db8::7"),
    "enroll_hotp": request("enroll", ["bob", "--hotp", "--secret",
                                      "JBSWY3DPEHPK3PXP", "--digits", "8",
                                      "--counter", "5"]),
    "user_add": request("user.add", ["carol", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"
                                     "AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2"
                                     "l9GKJl carol@example"]),
    "status_json": request("status", json=True),
    # Shapes the decoder must refuse: no version, a future version.
    "no_version": request("status", version=None),
    "version_2": request("status", version=2),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
