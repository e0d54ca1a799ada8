#!/usr/bin/env python3
"""Prints N distinct loopback ports (default 1) that nothing listens on, chosen outside the
kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), where no outgoing
connection or port-0 listener can take one before the server that is told it binds it.
The same rule as reel_sysinfo::ports, for the shell tests."""
import os
import random
import socket
import sys

count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first, last = (int(x) for x in f.read().split()[:2])
except (OSError, ValueError):
    first, last = 32768, 60999
if first - 10000 >= 2000:
    pool = range(10000, first)
elif 65535 - max(last, 9999) >= 2000:
    pool = range(max(last, 9999) + 1, 65536)
else:
    pool = None

ports = []
rng = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "little"))
for _ in range(4096):
    if len(ports) == count:
        break
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", rng.choice(pool) if pool else 0))
        except OSError:
            continue
        port = s.getsockname()[1]
    if port not in ports:
        ports.append(port)
if len(ports) < count:
    sys.exit("free-ports: no free loopback ports")
print(*ports)
