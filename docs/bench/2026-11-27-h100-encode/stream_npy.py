"""Writes an (n, d) float16 .npy to stdout without holding it: one random
block of rows (standard normal, seeded) repeated, the last block cut to n.
Usage: python3 stream_npy.py N D > FIFO"""
import random
import struct
import sys

n, d = int(sys.argv[1]), int(sys.argv[2])
header = "{'descr': '<f2', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
pad = 64 - (10 + len(header) + 1) % 64
header = header + " " * pad + "\n"
out = sys.stdout.buffer
out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
rng = random.Random(7)
rows = 8192
block = struct.pack("<%de" % (rows * d), *(rng.gauss(0.0, 1.0) for _ in range(rows * d)))
left = n
while left > 0:
    take = min(rows, left)
    out.write(block if take == rows else block[: take * d * 2])
    left -= take
out.flush()
