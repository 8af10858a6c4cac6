#!/usr/bin/env python3
"""When a client's HTTP/1.1 requests actually left: a capture on the loopback interface.

    sends.py record PORT SECONDS OUT   kernel timestamps (ns) of every TCP segment to PORT on lo
                                       whose payload starts with "GET ", one per line, into OUT
    sends.py summary TOOL RATE FILE    one markdown row: how evenly those requests were spaced at
                                       RATE/s (a bunch: requests under half the even spacing apart)

bench/rate.sh uses it to show how each client spreads a fixed rate: a client that wakes once
per timer tick sends its requests in bunches (cheaper per request, each late by up to a tick),
one that keeps an even schedule sends them apart. Needs CAP_NET_RAW (root), since it reads an
AF_PACKET socket; the capture costs CPU, so runs with it are not the measured ones.
"""
import socket
import struct
import sys
import time

SO_TIMESTAMPNS = 35
ETH_P_ALL = 0x0003


def record(port: int, seconds: float, out: str) -> None:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind(("lo", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.settimeout(0.2)
    stamps = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, anc, _flags, addr = s.recvmsg(128, 64)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue  # loopback shows each packet twice
        ip = data[14:]
        if len(ip) < 20 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 15) * 4 :]
        if len(tcp) < 20 or struct.unpack("!H", tcp[2:4])[0] != port:
            continue
        if tcp[(tcp[12] >> 4) * 4 :][:4] != b"GET ":
            continue
        for _level, kind, value in anc:
            if kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                stamps.append(sec * 1_000_000_000 + nsec)
    with open(out, "w") as f:
        f.write("\n".join(map(str, stamps)))


def summary(tool: str, rate: str, path: str) -> None:
    with open(path) as f:
        stamps = sorted(int(x) for x in f.read().split())
    if len(stamps) < 100:
        print(f"| {rate} | {tool} | (only {len(stamps)} requests captured) | | | |")
        return
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    # Requests closer together than half the even spacing left in one bunch.
    bunch_gap = 500_000_000 / int(rate)
    bunches, size = [], 1
    for g in gaps:
        if g < bunch_gap:
            size += 1
        else:
            bunches.append(size)
            size = 1
    bunches.append(size)
    ordered = sorted(gaps)
    p50, p99 = ordered[len(ordered) // 2], ordered[len(ordered) * 99 // 100]
    mean = sum(bunches) / len(bunches)
    print(f"| {int(rate):,} | {tool} | {len(stamps):,} | {mean:.1f} | {p50 / 1000:.1f} | {p99 / 1000:.1f} |")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "record":
        record(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "summary":
        summary(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
