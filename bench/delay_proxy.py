#!/usr/bin/env python3
"""delay_proxy.py: WAN delays between sites on one machine, in user space.

  delay_proxy.py LISTEN_ADDR:PORT=TARGET_ADDR:PORT:ONE_WAY_MS ...

Listens on every LISTEN_ADDR:PORT and forwards each connection to its
TARGET_ADDR:PORT; every byte, in both directions, is delivered ONE_WAY_MS
after it arrived (order kept), so a request and its answer through the
proxy take a round trip of 2 x ONE_WAY_MS on top of loopback.  The bytes
are forwarded as they are: CurveZMQ stays end to end between the nodes.

bench/run-quorum uses it when the kernel has no sch_netem (tc qdisc ...
netem), as on the machines this was written on: each site's [peer]
endpoints name a proxy address of that (site, peer) pair.  Prints "ready"
on stdout once every address listens; runs until SIGTERM or SIGINT.
"""
import asyncio
import signal
import socket
import sys
import time


async def pump(reader, writer, delay):
    """Copy reader to writer, each chunk released delay seconds after it
    was read."""
    q = asyncio.Queue()

    async def release():
        while True:
            due, data = await q.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    task = asyncio.ensure_future(release())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            q.put_nowait((time.monotonic() + delay, data))
    except (ConnectionError, OSError):
        pass
    q.put_nowait((0, None))
    try:
        await task
    except (ConnectionError, OSError):
        pass


def nodelay(writer):
    s = writer.get_extra_info("socket")
    if s is not None:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def handler(target, port, delay):
    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection(target, port)
        except OSError:
            cw.close()
            return
        nodelay(cw)
        nodelay(sw)
        await asyncio.gather(pump(cr, sw, delay), pump(sr, cw, delay),
                             return_exceptions=True)
    return handle


async def main(specs):
    servers = []
    for spec in specs:
        try:
            listen, target = spec.split("=", 1)
            laddr, lport = listen.rsplit(":", 1)
            taddr, tport, ms = target.split(":")
            delay = float(ms) / 1000.0
            srv = await asyncio.start_server(
                handler(taddr, int(tport), delay), laddr, int(lport),
                reuse_address=True)
        except (ValueError, OSError) as e:
            print("delay_proxy: %s: %s" % (spec, e), file=sys.stderr)
            return 2
        servers.append(srv)
    print("ready", flush=True)
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(
            sig, lambda: stop.done() or stop.set_result(None))
    await stop
    for srv in servers:
        srv.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    sys.exit(asyncio.run(main(sys.argv[1:])))
