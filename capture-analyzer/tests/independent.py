#!/usr/bin/env python3
"""Independent per-flow statistics from a nanosecond pcap of BFD over
Ethernet/IPv4/UDP, written without the analyzer's code: the test compares
its numbers with `linecard analyze`. Exact percentiles (nearest rank over
sorted gaps), exact maximum, flaps = sender state Up -> not Up."""
import json
import struct
import sys


def main(path):
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data, 0)[0]
    assert magic == 0xA1B23C4D, "expects a little-endian nanosecond pcap"
    at = 24
    flows = {}
    while at + 16 <= len(data):
        sec, nsec, caplen, _ = struct.unpack_from("<IIII", data, at)
        frame = data[at + 16 : at + 16 + caplen]
        at += 16 + caplen
        if len(frame) < 14 + 20 + 8 + 24 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 17:
            continue
        sport, dport = struct.unpack_from("!HH", ip, ihl)
        if dport not in (3784, 4784):
            continue
        bfd = ip[ihl + 8 :]
        state = bfd[1] >> 6
        key = (".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20])), sport, dport)
        flows.setdefault(key, []).append((sec * 10**9 + nsec, state))
    out = []
    for (src, dst, sport, dport), packets in flows.items():
        gaps = sorted(b[0] - a[0] for a, b in zip(packets, packets[1:]))
        n = len(gaps)
        rank = lambda q: gaps[min(n - 1, int(q * n))] / 1e6
        flaps = sum(1 for a, b in zip(packets, packets[1:]) if a[1] == 3 and b[1] != 3)
        out.append(
            {
                "src": src, "dst": dst, "src_port": sport, "dst_port": dport,
                "packets": len(packets), "p50": rank(0.5), "p99": rank(0.99),
                "max": gaps[-1] / 1e6, "flaps": flaps,
            }
        )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
