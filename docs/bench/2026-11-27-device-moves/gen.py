# Standard normal f32 points, saved as DIR/x_N_D.npy (what kmeans_anchors.py --npy reads).
import sys, os, numpy as np, torch
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
for spec in sys.argv[2:]:
    n, d = (int(v) for v in spec.split(","))
    p = f"{out}/x_{n}_{d}.npy"
    if os.path.exists(p): continue
    g = torch.Generator(device="cuda"); g.manual_seed(n * 7 + d)
    x = torch.randn(n, d, device="cuda", generator=g).cpu().numpy()
    np.save(p, x); print("wrote", p, x.shape, flush=True)
