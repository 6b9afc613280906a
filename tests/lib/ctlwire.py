"""ctlwire.py: the node's user and admin sockets, for tests in python.

The framing of node/requests/usersock.h and common/wire.h: each message a
4-byte big-endian length, then that many bytes (a grantd.v1.Request from
the client, a grantd.v1.Reply from the node); several requests may go on
one connection, answered in their order.
"""
import socket
import struct


def connect(path, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def frame(msg):
    return struct.pack(">I", len(msg)) + msg


def send(s, msg, length=None):
    """Send msg framed (length: announce another length).  A node that
    refused and closed is not an error here: its answer is still read."""
    hdr = struct.pack(">I", len(msg) if length is None else length)
    try:
        s.sendall(hdr + msg)
    except (BrokenPipeError, ConnectionResetError):
        pass


def _exact(s, n):
    b = b""
    while len(b) < n:
        try:
            chunk = s.recv(n - len(b))
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        b += chunk
    return b


def recv(s):
    """The next message, or None when the node closed or said nothing in
    time (socket.timeout propagates)."""
    h = _exact(s, 4)
    if h is None:
        return None
    return _exact(s, struct.unpack(">I", h)[0])


def call(path, msg, timeout=5.0, length=None):
    s = connect(path, timeout)
    try:
        send(s, msg, length)
        return recv(s)
    finally:
        s.close()


def status(reply):
    """Reply field 1 (status), a varint right after its tag byte 0x08."""
    if reply and reply[:1] == b"\x08":
        return reply[1]
    return "no-status"
