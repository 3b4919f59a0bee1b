# How many candidates the tc kernel's bound leaves per point (final survivors: A - e <= min(A + e)),
# on standard normal points after a few Lloyd steps, for the current bound and tighter variants.
import sys, torch, numpy as np
torch.backends.cuda.matmul.allow_tf32 = False
def eps(d):
    S = -(-d // 16)
    return 2**-9 + S * 2**-16 + (d + 8) * 2**-23
for spec in sys.argv[1:]:
    n, d, k = (int(v) for v in spec.split(","))
    x = torch.from_numpy(np.load(f"/tmp/pts/x_{n}_{d}.npy")).cuda()
    if n > 200000: x = x[:200000]
    g = torch.Generator(device="cuda"); g.manual_seed(1)
    c = x[torch.randperm(x.shape[0], device="cuda", generator=g)[:k]].clone()
    for it in range(4):
        a = ((c * c).sum(1)[None] - 2 * x @ c.T).argmin(1)
        s = torch.zeros_like(c).index_add_(0, a, x); cnt = torch.bincount(a, minlength=k).clamp_min(1)[:, None]
        c = s / cnt
    xs = x[:20000]
    xn = (xs * xs).sum(1); cn = (c * c).sum(1)
    A = (xn[:, None] + cn[None] - 2 * (xs.double() @ c.double().T).float()).clamp_min(0)
    # scale as the kernel: max|x| into [2^12, 2^13)
    e_ = int(np.floor(np.log2(x.abs().max().item())))
    sig = 2.0 ** (12 - e_)
    rx = (xs - (xs * sig).half().float() / sig).norm(dim=1); rc = (c - (c * sig).half().float() / sig).norm(dim=1)
    xq = xn.sqrt(); cq = cn.sqrt()
    S = -(-d // 16)
    comb = 2**-20 * (xn[:, None] + cn[None])
    variants = {
        "current": 2 * eps(d) * xq[:, None] * cq[None] + comb,
        "resid_in(2x)": 2 * (xq[:, None] * rc[None] + rx[:, None] * cq[None]) + 2 * (S * 2**-16 + (d + 8) * 2**-23) * xq[:, None] * cq[None] + comb,
        "resid_in,acc/4": 2 * (xq[:, None] * rc[None] + rx[:, None] * cq[None]) + 2 * (S * 2**-18 + (d + 8) * 2**-23) * xq[:, None] * cq[None] + comb,
    }
    for name, e in variants.items():
        U = (A + e).min(1, keepdim=True).values
        cntc = ((A - e) <= U).sum(1)
        q = lambda t: f"{100 * (cntc > t).float().mean().item():.2f}%"
        print(f"{n}x{d}x{k} {name:<16} mean {cntc.float().mean().item():.2f} >8 {q(8)} >16 {q(16)} >24 {q(24)} >32 {q(32)} max {cntc.max().item()}", flush=True)
    print(f"  |r_x|/|x| mean {(rx / xq).mean().item():.3e} (2^-11 = {2**-11:.3e}); |r_c|/|c| mean {(rc / cq).mean().item():.3e}; |c| mean {cq.mean().item():.3f} |x| mean {xq.mean().item():.2f}")
