#!/usr/bin/env python3
"""notify_listen.py SOCKET OUT LOG: play systemd's side of sd_notify(3).

Binds a unix datagram socket at SOCKET (what NOTIFY_SOCKET names) and
appends one line per datagram to OUT:

    MONOTONIC_MS <TAB> LOGGED <TAB> MESSAGE

MESSAGE is the datagram with its newlines written as " | "
("READY=1 | STATUS=serving; peers 0/2; syncing no").  LOGGED is 1 when
LOG (the node's log) held the line "sync done" at the moment the datagram
arrived, else 0: the node logs it before it tells systemd it serves, so a
READY=1 with LOGGED 0 came too early.

Exits when its parent (the test) is gone, or after 15 minutes.
"""
import os
import socket
import sys
import time


def main():
    path, out, log = sys.argv[1:4]
    parent = os.getppid()
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.5)
    end = time.monotonic() + 900
    with open(out, "a", buffering=1) as f:
        f.write("%d\t-\tLISTENING\n" % (time.monotonic() * 1000))
        while time.monotonic() < end and os.getppid() == parent:
            try:
                msg = s.recv(4096)
            except socket.timeout:
                continue
            try:
                with open(log, "rb") as lf:
                    logged = b"sync done" in lf.read()
            except OSError:
                logged = False
            text = msg.decode("utf-8", "replace").strip("\n")
            f.write("%d\t%d\t%s\n" % (time.monotonic() * 1000, logged,
                                       text.replace("\n", " | ")))
    os.unlink(path)


if __name__ == "__main__":
    main()
