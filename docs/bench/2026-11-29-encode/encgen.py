# Writes DIR/x{i}.npy: FILES files of N x D standard-normal float32 (and, with
# --f16, DIR/h{i}.npy: the same points as float16).
import sys, os, numpy as np
out, files, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
for i in range(files):
    rng = np.random.default_rng(100 + i)
    x = rng.standard_normal((n, d), dtype=np.float32)
    np.save(f"{out}/x{i}.npy", x)
    if "--f16" in sys.argv:
        np.save(f"{out}/h{i}.npy", x.astype(np.float16))
    print("wrote", i, flush=True)
