"""The benchmark causal language models written the way a PyTorch user would, trained on the
CPU with --threads threads: Adam(1e-3, eps 1e-7 as Keras'), nn.CrossEntropyLoss over every
position, float32, eager mode, the same random byte windows as mwtrain's (the .npz of
tests/bench/peer_keras_lm.py data; its x_train or its named x_train.token_ids; or a folder of
x_train.npy and y_train.npy, tests/bench/gpt_data.py's). --model picks:

  gpt        tests/bench/peer_keras_lm.py's GPT by hand: nn.Embedding, post-norm blocks of [q, k,
             v and output nn.Linear, F.scaled_dot_product_attention(is_causal=True), residual,
             nn.LayerNorm(eps 1e-5), nn.Linear(ff) -> ReLU -> nn.Linear(width), residual,
             nn.LayerNorm], nn.Linear(vocab) on each position
  gpt2-hf    Hugging Face transformers' GPT2LMHeadModel from a GPT2Config of the same width,
             blocks, heads, ff (ReLU), context and vocabulary, no dropout, attn_implementation
             "sdpa". GPT-2 is pre-norm (the GPT above is post-norm), has learned position
             embeddings and ties its head to the token embedding: the same matrix work.
  llama      tests/bench/bench_llama.sh's Llama by hand: nn.Embedding, blocks of [nn.RMSNorm(eps
             1e-6) -> q (heads x width/heads), k and v (kv-heads x width/heads) nn.Linear without
             bias -> rotary positions (base 10000, the halves rotated) on q and k ->
             F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) -> output nn.Linear,
             residual, nn.RMSNorm -> SwiGLU: down(silu(gate(x)) * up(x)) of width ff, residual],
             nn.RMSNorm, an untied nn.Linear(vocab) head without bias
  llama-hf   Hugging Face transformers' LlamaForCausalLM from a LlamaConfig of the same sizes
             (untied head, RMSNorm eps 1e-6, rope theta 10000), attn_implementation "sdpa"

  python peer_torch_lm.py DATA [--model gpt] [--threads 2] [--batch 32] [--steps 40]
         [--warmup 5] [--blocks 4] [--width 128] [--heads 4] [--kv-heads 4] [--ff 512]
         [--vocab 256] [--device cpu|cuda] [--bf16]
  python peer_torch_lm.py gemm --width 256 --ff 768 --kv-width 64 --vocab 256 --rows 4096

A timed step: the batch's slice, forward, loss, backward, Adam step. The result, printed last:
`peer_torch_lm tokens_per_sec=<median over windows of 5 steps> torch=<version>`; with --device
cuda (tests/bench/gpu_first_run.sh) the model, the data and the step on the GPU, the clock read
after torch.cuda.synchronize(), and max_mem_mib= the step's peak of torch.cuda.max_memory_allocated;
--bf16: the forward and the loss under torch.autocast(bfloat16), as Keras' mixed_bfloat16. `gemm` prints
torch.mm's GFLOP/s (PyTorch's BLAS, --threads threads) at a Llama's training products and,
last, `peer_torch_lm gemm_gflops=<their work-weighted mean>`."""
import argparse
import os
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


def rotate(x, cos, sin):
    """Rotary positions, the halves of each head rotated (KerasHub's and Hugging Face's)."""
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, width, heads, kv_heads, ff):
        super().__init__()
        self.heads, self.kv_heads, self.dh = heads, kv_heads, width // heads
        self.n1, self.n2 = nn.RMSNorm(width, eps=1e-6), nn.RMSNorm(width, eps=1e-6)
        self.q = nn.Linear(width, heads * self.dh, bias=False)
        self.k = nn.Linear(width, kv_heads * self.dh, bias=False)
        self.v = nn.Linear(width, kv_heads * self.dh, bias=False)
        self.o = nn.Linear(heads * self.dh, width, bias=False)
        self.gate, self.up = nn.Linear(width, ff, bias=False), nn.Linear(width, ff, bias=False)
        self.down = nn.Linear(ff, width, bias=False)

    def forward(self, x, cos, sin):
        n, t, d = x.shape
        h = self.n1(x)

        def split(z, heads):
            return z.view(n, t, heads, self.dh).transpose(1, 2)
        q = rotate(split(self.q(h), self.heads), cos, sin)
        k = rotate(split(self.k(h), self.kv_heads), cos, sin)
        a = F.scaled_dot_product_attention(q, k, split(self.v(h), self.kv_heads), is_causal=True,
                                           enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(n, t, d))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab, width, heads, kv_heads, ff, blocks, context):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(LlamaBlock(width, heads, kv_heads, ff) for _ in range(blocks))
        self.norm = nn.RMSNorm(width, eps=1e-6)
        self.head = nn.Linear(width, vocab, bias=False)
        dh = width // heads
        inv = 1.0 / 10000 ** (torch.arange(0, dh, 2, dtype=torch.float32) / dh)
        ang = torch.outer(torch.arange(context, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, ids):
        x = self.embed(ids)
        t = ids.shape[1]
        for b in self.blocks:
            x = b(x, self.cos[:t], self.sin[:t])
        return self.head(self.norm(x))


class HF(nn.Module):
    """A transformers causal LM from its config: the logits of every position."""

    def __init__(self, kind, a, context):
        super().__init__()
        import transformers as tr
        if kind == "gpt2-hf":
            cfg = tr.GPT2Config(vocab_size=a.vocab, n_positions=context, n_embd=a.width,
                                n_layer=a.blocks, n_head=a.heads, n_inner=a.ff,
                                activation_function="relu", resid_pdrop=0.0, embd_pdrop=0.0,
                                attn_pdrop=0.0, layer_norm_epsilon=1e-5, bos_token_id=None,
                                eos_token_id=None)
        else:
            cfg = tr.LlamaConfig(vocab_size=a.vocab, hidden_size=a.width,
                                 intermediate_size=a.ff, num_hidden_layers=a.blocks,
                                 num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                                 max_position_embeddings=context, rms_norm_eps=1e-6,
                                 rope_theta=10000.0, tie_word_embeddings=False,
                                 attention_dropout=0.0)
        self.m = tr.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
        self.impl = "transformers %s, attention %s" % (tr.__version__,
                                                       self.m.config._attn_implementation)

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


def gemm(a):
    """torch.mm at a Llama's training products (forward, input gradient, weight gradient)."""
    r, d, f, kv, v = a.rows, a.width, a.ff, a.kv_width, a.vocab
    shapes = []
    for k, n in ((d, d), (d, kv), (d, f), (f, d), (d, v)):
        shapes += [(r, n, k, "N"), (r, k, n, "N"), (k, n, r, "T")]
    total = work = 0.0
    for m, n, k, t in shapes:
        x = torch.rand(k, m) if t == "T" else torch.rand(m, k)
        y = torch.rand(k, n)
        ts = []
        for i in range(a.steps + 2):
            t0 = time.perf_counter()
            torch.mm(x.t() if t == "T" else x, y)
            ts.append(time.perf_counter() - t0)
        s = statistics.median(ts[2:])
        print("  torch.mm %s(%d x %d) x (%d x %d) %8.1f GFLOP/s" % (
            "T" if t == "T" else "", m, k, k, n, 2 * m * n * k / s / 1e9))
        total, work = total + s, work + 2 * m * n * k
    print("peer_torch_lm gemm_gflops=%.1f torch=%s threads=%d" % (work / total / 1e9,
                                                                 torch.__version__, a.threads))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--model", choices=("gpt", "gpt2-hf", "llama", "llama-hf"), default="gpt")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true")
    for k, v in [("threads", 2), ("batch", 32), ("steps", 40), ("warmup", 5), ("blocks", 4),
                 ("width", 128), ("heads", 4), ("kv-heads", 4), ("ff", 512), ("vocab", 256),
                 ("rows", 4096), ("kv-width", 64)]:
        p.add_argument("--" + k, type=int, default=v)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.data == "gemm":
        return gemm(a)
    d = np.load(a.data) if not os.path.isdir(a.data) else {  # or a folder of .npy files
        k: np.load(os.path.join(a.data, k + ".npy")) for k in ("x_train", "y_train")}
    x = torch.from_numpy(d["x_train" if "x_train" in d else "x_train.token_ids"]
                         .astype(np.int64))
    y = torch.from_numpy(d["y_train"].astype(np.int64))
    impl = "hand-written, attention sdpa"
    if a.model == "gpt":
        m = GPT(a.vocab, a.width, a.heads, a.ff, a.blocks)
    elif a.model == "llama":
        m = Llama(a.vocab, a.width, a.heads, a.kv_heads, a.ff, a.blocks, x.shape[1])
    else:
        m = HF(a.model, a, x.shape[1])
        impl = m.impl
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    m, x, y = m.to(dev), x.to(dev), y.to(dev)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    t = []
    for s in range(a.warmup + a.steps):
        i = (s * a.batch) % (len(x) - a.batch + 1)
        xb, yb = x[i:i + a.batch], y[i:i + a.batch]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            out = m(xb)
            loss = loss_fn(out.reshape(-1, out.shape[-1]).float(), yb.reshape(-1))
        loss.backward()
        opt.step()
        if s >= a.warmup - 1:
            if cuda:
                torch.cuda.synchronize()
            t.append(time.perf_counter())
    per = [(t[i + 5] - t[i]) / 5 for i in range(0, len(t) - 5, 5)]
    tokens = a.batch * x.shape[1]
    mem = " max_mem_mib=%.0f" % (torch.cuda.max_memory_allocated() / 2 ** 20) if cuda else ""
    print("peer_torch_lm tokens_per_sec=%.0f torch=%s model=%s (%s) threads=%d batch=%d steps=%d "
          "params=%d device=%s%s%s" % (tokens / statistics.median(per), torch.__version__,
                                       a.model, impl, a.threads, a.batch, a.steps,
                                       sum(q.numel() for q in m.parameters()), a.device,
                                       " bf16" if a.bf16 else "", mem))
    return 0


if __name__ == "__main__":
    sys.exit(main())
