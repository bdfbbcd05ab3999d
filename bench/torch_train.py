#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench train`: training steps of the demo model.

The same model as src/cli/train.cpp (token and position embeddings, pre-LayerNorm blocks of
causal grouped-query attention and a GELU MLP, final LayerNorm, head), the same reverse-task
batches (digits, '=', reversed digits; loss on the answer), AdamW with gradient clipping:
a step is forward, cross_entropy, backward, clip_grad_norm_, optimizer step, zero_grad. One
JSON row per thread count; the case name matches Tessera's
(`train/float32/<batch>x<tokens>/dim<d>-layers<l>`), median seconds per step.
"""
import math
import sys

from anchor_common import anchor_parser, emit_timed, import_torch, thread_counts


def main():
    ap = anchor_parser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--digits", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    import torch.nn as nn
    import torch.nn.functional as F

    D, H, HKV, L = args.dim, args.heads, args.kv_heads, args.digits
    T = 2 * L

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(D, D)
            self.k_proj = nn.Linear(D, HKV * (D // H))
            self.v_proj = nn.Linear(D, HKV * (D // H))
            self.out_proj = nn.Linear(D, D)

        def forward(self, x):
            b, s, _ = x.shape
            hd = D // H
            q = self.q_proj(x).view(b, s, H, hd).transpose(1, 2)
            k = self.k_proj(x).view(b, s, HKV, hd).transpose(1, 2)
            v = self.v_proj(x).view(b, s, HKV, hd).transpose(1, 2)
            k = k.repeat_interleave(H // HKV, dim=1)
            v = v.repeat_interleave(H // HKV, dim=1)
            sc = q @ k.transpose(-2, -1) / math.sqrt(hd)
            sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
            return self.out_proj((sc.softmax(-1) @ v).transpose(1, 2).reshape(b, s, D))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(D), Attention(), nn.LayerNorm(D)
            self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(11, D), nn.Embedding(T, D)
            self.blocks = nn.ModuleList([Block() for _ in range(args.layers)])
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, 11)

        def forward(self, t):
            x = self.tok(t) + self.pos(torch.arange(t.shape[1]))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    case = f"train/float32/{args.batch}x{T}/dim{D}-layers{args.layers}"
    for t in thread_counts(args):
        torch.set_num_threads(t)
        torch.manual_seed(0)
        model = LM()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.99),
                                weight_decay=0.01)
        g = torch.Generator().manual_seed(1)

        def step():
            d = torch.randint(0, 10, (args.batch, L), generator=g)
            seq = torch.cat([d, torch.full((args.batch, 1), 10), d.flip(1)], 1)
            x, y = seq[:, :T], seq[:, 1:].clone()
            y[:, :L] = -100
            loss = F.cross_entropy(model(x).reshape(-1, 11), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()

        emit_timed("train", case, t, step, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
