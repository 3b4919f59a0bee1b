# Writes DIR/KIND/x_N_D.npy for the shapes and kinds asked: the data kinds of
# issue 39 (normal, offset, scaled-up, scaled-down, clustered, aniso).
import sys, os, numpy as np
out = sys.argv[1]
for spec in sys.argv[2:]:
    kind, n, d = spec.split(":"); n = int(float(n)); d = int(d)
    rng = np.random.default_rng(7)
    path = f"{out}/{kind}/x_{n}_{d}.npy"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path): continue
    x = rng.standard_normal((n, d), dtype=np.float32)
    if kind == "offset":
        x += (rng.standard_normal(d, dtype=np.float32) + 8.0)
    elif kind == "embed":  # unit vectors near one shared direction (cosine ~0.5 to the mean)
        mu = rng.standard_normal(d, dtype=np.float32); mu /= np.linalg.norm(mu)
        x = x / np.sqrt(d) + mu
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    elif kind == "up":
        x *= 1e3
    elif kind == "down":
        x *= 1e-3
    elif kind == "clustered":
        c = rng.standard_normal((1000, d), dtype=np.float32); c /= np.linalg.norm(c, axis=1, keepdims=True)
        x = c[rng.integers(0, 1000, n)] + x * (0.05 / np.sqrt(d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    elif kind == "aniso":
        dirs = rng.standard_normal((4, d), dtype=np.float32)
        x += (rng.standard_normal((n, 4), dtype=np.float32) * 10.0) @ dirs / np.sqrt(d)
    np.save(path, x.astype(np.float32))
    print("wrote", path, flush=True)
