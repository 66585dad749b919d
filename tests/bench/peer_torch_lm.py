"""The causal language model of tests/bench/peer_keras_lm.py written the way a PyTorch user
would: nn.Embedding, 4 post-norm blocks of [q, k, v and output nn.Linear, 
F.scaled_dot_product_attention(is_causal=True), residual, nn.LayerNorm(eps 1e-5), nn.Linear(ff)
-> ReLU -> nn.Linear(width), residual, nn.LayerNorm], nn.Linear(vocab) on each position;
nn.CrossEntropyLoss over every position, Adam(1e-3), float32, on the CPU with --threads
threads. The same random byte windows as mwtrain's (the .npz of peer_keras_lm.py data).

  python peer_torch_lm.py DATA [--threads 2] [--batch 32] [--steps 40] [--warmup 5]

A timed step: the batch's slice, forward, loss, backward, Adam step. The result, printed last:
`peer_torch_lm tokens_per_sec=<median over windows of 5 steps> torch=<version>`."""
import argparse
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads, ff):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(width, eps=1e-5), nn.LayerNorm(width, eps=1e-5)
        self.ff1, self.ff2 = nn.Linear(width, ff), nn.Linear(ff, width)

    def forward(self, x):
        n, t, d = x.shape
        h = self.heads

        def split(z):
            return z.view(n, t, h, d // h).transpose(1, 2)
        a = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)),
                                           is_causal=True)
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(n, t, d)))
        return self.ln2(x + self.ff2(F.relu(self.ff1(x))))


class GPT(nn.Module):
    def __init__(self, vocab=256, width=128, heads=4, ff=512, blocks=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.Sequential(*[Block(width, heads, ff) for _ in range(blocks)])
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        return self.head(self.blocks(self.embed(ids)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    for k, v in [("threads", 2), ("batch", 32), ("steps", 40), ("warmup", 5)]:
        p.add_argument("--" + k, type=int, default=v)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    d = np.load(a.data)
    x = torch.from_numpy(d["x_train"].astype(np.int64))
    y = torch.from_numpy(d["y_train"].astype(np.int64))
    m = GPT()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    t = []
    for s in range(a.warmup + a.steps):
        i = (s * a.batch) % (len(x) - a.batch + 1)
        xb, yb = x[i:i + a.batch], y[i:i + a.batch]
        opt.zero_grad(set_to_none=True)
        out = m(xb)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), yb.reshape(-1))
        loss.backward()
        opt.step()
        if s >= a.warmup - 1:
            t.append(time.perf_counter())
    per = [(t[i + 5] - t[i]) / 5 for i in range(0, len(t) - 5, 5)]
    tokens = a.batch * x.shape[1]
    print("peer_torch_lm tokens_per_sec=%.0f torch=%s threads=%d batch=%d steps=%d params=%d" %
          (tokens / statistics.median(per), torch.__version__, a.threads, a.batch, a.steps,
           sum(q.numel() for q in m.parameters())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
