"""PyTorch 1.13 reference values for tests/nn (the outside oracle for nn, losses and optim).

Usage: nn_reference.py IN.json OUT.json. IN holds named float64 tensors ({"shape", "data"});
each scenario below reads the ones it needs and writes its results under its own prefix.
test_nn.cpp builds the same inputs and computes the same scenarios with Tessera.
"""

import json
import math
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def load(path):
    with open(path) as f:
        raw = json.load(f)
    return {k: torch.tensor(v["data"], dtype=torch.float64).reshape(v["shape"])
            for k, v in raw.items()}


OUT = {}


def put(name, t):
    t = t.detach().to(torch.float64).contiguous()
    OUT[name] = {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def leaf(t):
    return t.clone().requires_grad_(True)


def losses(T):
    logits, tgt = T["ce.logits"], T["ce.target"].long()
    w = T["ce.weight"]
    tgt_ign = tgt.clone()
    tgt_ign[1] = -100
    cases = {
        "mean": dict(),
        "sum": dict(reduction="sum"),
        "none": dict(reduction="none"),
        "weight": dict(weight=w),
        "ignore": dict(ignore_index=-100, target=tgt_ign),
        "weight_ignore_smooth": dict(weight=w, target=tgt_ign, label_smoothing=0.2),
        "smooth": dict(label_smoothing=0.1),
        "smooth_sum": dict(label_smoothing=0.3, reduction="sum"),
    }
    for name, kw in cases.items():
        x = leaf(logits)
        t = kw.pop("target", tgt)
        out = F.cross_entropy(x, t, **kw)
        (out * T["ce.gout"][: out.numel()].reshape(out.shape)).sum().backward()
        put(f"ce.{name}.out", out)
        put(f"ce.{name}.grad", x.grad)
    # K-dimensional: [N, C, d]
    x = leaf(T["ce3.logits"])
    out = F.cross_entropy(x, T["ce3.target"].long(), label_smoothing=0.05)
    out.backward()
    put("ce3.out", out)
    put("ce3.grad", x.grad)

    a, b = leaf(T["reg.a"]), T["reg.b"]
    for name, fn in [("mse", F.mse_loss), ("l1", F.l1_loss)]:
        for red in ["mean", "sum"]:
            a.grad = None
            out = fn(a, b, reduction=red)
            out.backward()
            put(f"{name}.{red}.out", out)
            put(f"{name}.{red}.grad", a.grad)
    x = leaf(T["bce.x"])
    out = F.binary_cross_entropy_with_logits(x, T["bce.t"], weight=T["bce.w"],
                                             pos_weight=T["bce.pw"])
    out.backward()
    put("bce.out", out)
    put("bce.grad", x.grad)


def norms(T):
    x, w, b = leaf(T["ln.x"]), leaf(T["ln.w"]), leaf(T["ln.b"])
    y = F.layer_norm(x, [x.shape[-1]], w, b, 1e-5)
    (y * T["ln.gout"]).sum().backward()
    put("ln.out", y)
    put("ln.gx", x.grad)
    put("ln.gw", w.grad)
    put("ln.gb", b.grad)
    x, w = leaf(T["ln.x"]), leaf(T["ln.w"])
    eps = torch.finfo(torch.float32).eps
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w  # RMSNorm (not in 1.13)
    (y * T["ln.gout"]).sum().backward()
    put("rms.out", y)
    put("rms.gx", x.grad)
    put("rms.gw", w.grad)


def attention(T):
    """Causal attention with grouped-query heads, spelled out (1.13 has no SDPA)."""
    x = leaf(T["attn.x"])
    B, S, E = x.shape
    H, HKV = 4, 2
    D = E // H
    p = {k[len("attn.p."):]: leaf(v) for k, v in T.items() if k.startswith("attn.p.")}
    q = F.linear(x, p["q_proj.weight"], p["q_proj.bias"]).view(B, S, H, D).transpose(1, 2)
    k = F.linear(x, p["k_proj.weight"], p["k_proj.bias"]).view(B, S, HKV, D).transpose(1, 2)
    v = F.linear(x, p["v_proj.weight"], p["v_proj.bias"]).view(B, S, HKV, D).transpose(1, 2)
    k = k.repeat_interleave(H // HKV, dim=1)
    v = v.repeat_interleave(H // HKV, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(D)
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, E)
    y = F.linear(y, p["out_proj.weight"], p["out_proj.bias"])
    (y * T["attn.gout"]).sum().backward()
    put("attn.out", y)
    put("attn.gx", x.grad)
    for n, t in p.items():
        put(f"attn.g.{n}", t.grad)


def optimizers(T):
    grads = [T[f"opt.g{i}"] for i in range(3)]
    configs = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
        "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1,
                                                   weight_decay=0.01),
        "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
        "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.9), eps=1e-6,
                                            weight_decay=0.1),
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.95), weight_decay=0.1),
    }
    for name, make in configs.items():
        p = leaf(T["opt.p"])
        opt = make([p])
        for i, g in enumerate(grads):
            p.grad = g.clone()
            opt.step()
            put(f"opt.{name}.{i}", p)
    p = leaf(T["opt.p"])
    p.grad = T["opt.g0"].clone() * 10
    q = leaf(T["opt.g1"])
    q.grad = T["opt.g2"].clone()
    total = torch.nn.utils.clip_grad_norm_([p, q], 1.5)
    put("clip.total", total.reshape([]))
    put("clip.p", p.grad)
    put("clip.q", q.grad)
    opt = torch.optim.SGD([leaf(T["opt.p"])], lr=0.5)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    lrs = []
    for _ in range(8):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    put("steplr", torch.tensor(lrs))


def ctc(T):
    lp = T["ctc.lp"]
    tg2 = T["ctc.targets"].long()
    il, tl = T["ctc.il"].long(), T["ctc.tl"].long()
    flat = torch.cat([tg2[n, : tl[n]] for n in range(tg2.shape[0])])
    for name, kw, tg in [("mean", {}, tg2), ("sum", {"reduction": "sum"}, tg2),
                         ("none_flat", {"reduction": "none"}, flat),
                         ("blank2", {"blank": 2}, tg2)]:  # no target uses label 2
        x = leaf(lp)
        out = F.ctc_loss(x, tg, il, tl, **kw)
        (out * T["ctc.gout"][: out.numel()].reshape(out.shape)).sum().backward()
        put(f"ctc.{name}.out", out)
        put(f"ctc.{name}.grad", x.grad)
    # An impossible alignment (target longer than the input) with and without zero_infinity.
    x = leaf(lp)
    il2 = il.clone()
    il2[0] = 1
    out = F.ctc_loss(x, tg2, il2, tl, reduction="none", zero_infinity=True)
    out.sum().backward()
    put("ctc.zeroinf.out", out)
    put("ctc.zeroinf.grad", x.grad)


T = load(sys.argv[1])
losses(T)
norms(T)
attention(T)
optimizers(T)
ctc(T)
with open(sys.argv[2], "w") as f:
    json.dump(OUT, f)
