# The host's read rate from the page cache (16 threads of 8 MiB preadv into
# reused buffers), alone and while the device copies from page-locked host
# memory at full speed (PyTorch, 1 GiB pinned, non_blocking H2D in a loop):
# a read-then-copy encode moves every byte through both.
import sys, os, time, threading
from concurrent.futures import ThreadPoolExecutor
import torch
fs = sys.argv[1:]; tot = sum(os.path.getsize(f) for f in fs)
P = 8 << 20
jobs = [(f, o, min(P, os.path.getsize(f) - o)) for f in fs for o in range(0, os.path.getsize(f), P)]
local = threading.local()
def reused(a):
    f, off, ln = a
    if not hasattr(local, "b"): local.b = bytearray(P)
    fd = os.open(f, os.O_RDONLY); os.preadv(fd, [memoryview(local.b)[:ln]], off); os.close(fd)
def read_rate():
    t = time.time()
    with ThreadPoolExecutor(16) as ex: list(ex.map(reused, jobs))
    return tot / (time.time() - t) / 1e9
host = torch.empty(1 << 28, dtype=torch.float32).pin_memory(); dev = torch.empty_like(host, device="cuda")
s = torch.cuda.Stream()
def copy_rate(stop):
    n = 0; t = time.time()
    with torch.cuda.stream(s):
        while not stop.is_set():
            dev.copy_(host, non_blocking=True); s.synchronize(); n += 1
    return n * host.numel() * 4 / (time.time() - t) / 1e9
for rep in range(2):
    print("BW read alone GB/s", round(read_rate(), 1), flush=True)
    stop = threading.Event(); out = {}
    th = threading.Thread(target=lambda: out.setdefault("c", copy_rate(stop))); th.start()
    time.sleep(0.2); r = read_rate(); stop.set(); th.join()
    print("BW read while copying GB/s", round(r, 1), "copy GB/s", round(out["c"], 1), flush=True)
    stop = threading.Event(); th = threading.Thread(target=lambda: out.__setitem__("c", copy_rate(stop))); th.start()
    time.sleep(1.0); stop.set(); th.join()
    print("BW copy alone GB/s", round(out["c"], 1), flush=True)
