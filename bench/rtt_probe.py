#!/usr/bin/env python3
"""rtt_probe.py: the round trip of a path through bench/delay_proxy.py, as
measured in the same run as the figures it is the floor of.

  rtt_probe.py ECHO_ADDR:PORT PROXY_ADDR:PORT [N]

Runs a TCP echo server on ECHO_ADDR:PORT (the proxy's target), connects
to PROXY_ADDR:PORT, and times N (default 200) round trips of 100 bytes,
one at a time.  Prints "p50_ms=... p99_ms=... max_ms=... n=N".
"""
import socket
import sys
import threading
import time


def serve(listener):
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = conn.recv(4096)
        if not data:
            break
        conn.sendall(data)
    conn.close()


def addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def main():
    if len(sys.argv) not in (3, 4):
        sys.stderr.write(__doc__)
        return 2
    n = int(sys.argv[3]) if len(sys.argv) == 4 else 200
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(addr(sys.argv[1]))
    listener.listen(1)
    threading.Thread(target=serve, args=(listener,), daemon=True).start()
    c = socket.create_connection(addr(sys.argv[2]), timeout=10)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * 100
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        c.sendall(msg)
        got = 0
        while got < len(msg):
            chunk = c.recv(4096)
            if not chunk:
                sys.stderr.write("rtt_probe: the proxy closed the connection\n")
                return 1
            got += len(chunk)
        times.append((time.monotonic() - t0) * 1000.0)
    c.close()
    times.sort()
    pick = lambda q: times[min(len(times) - 1, int((len(times) - 1) * q + 0.5))]
    print("p50_ms=%.2f p99_ms=%.2f max_ms=%.2f n=%d"
          % (pick(0.50), pick(0.99), times[-1], n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
