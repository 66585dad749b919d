#!/usr/bin/python3
"""PyTorch peer for mwtrain's training-throughput benchmark.

The tutorial CNN written the way a PyTorch user would (NCHW, nn.Conv2d,
nn.MaxPool2d, nn.Linear, float32), trained with Adam(lr=1e-3, eps=1e-7) and
CrossEntropyLoss on Fashion-MNIST, in one process on the CPU, or on one GPU
with --device cuda (the peer of mwtrain --device gpu: FP32 unless --tf32, as
mwtrain; PyTorch's own default lets cuDNN use TF32). --bf16: the forward under
torch.autocast(dtype=torch.bfloat16), PyTorch's mixed precision (float32 weights
and optimizer, bfloat16 convolutions and matmuls), the peer of mwtrain
--dtype-policy mixed_bfloat16. --f16 (with --device cuda): the same in float16 with
torch.cuda.amp.GradScaler's dynamic loss scaling, the peer of mixed_float16.

  /usr/bin/python3 tests/bench/peer_torch.py --threads 2 [--batch 64]
      [--steps 200] [--warmup 20] [--data-dir DIR] [--profile]
      [--device cpu|cuda] [--tf32] [--bf16 | --f16]

A timed step is: gather the batch (uint8 -> float32 /255, like mwtrain's batch
assembly; on a GPU the uint8 batch is copied up and converted there), forward,
loss, backward, Adam step. Steps walk consecutive batches
of one fixed random permutation of the training set (wrapping around). After
--warmup untimed steps, --steps steps are timed in windows of 20; the result
is the median images/sec over the windows. The last line printed is always

  peer_torch images_per_sec=<median> threads=<T> batch=<B> steps=<S> mkldnn=<bool> device=<D>

--profile additionally profiles a few extra steps (after the timed run, so
the number above is unaffected) and prints the top-15 ops by self CPU time
plus a per-layer forward/backward table.
"""
import argparse
import gzip
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
WINDOW = 20
SEED = 1234


def parse_args():
    ap = argparse.ArgumentParser(description="PyTorch peer: CNN training throughput")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200, help="timed steps")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    ap.add_argument("--data-dir", default=DEFAULT_DATA)
    ap.add_argument("--profile", action="store_true",
                    help="print a per-op / per-layer profile (extra steps, untimed)")
    ap.add_argument("--profile-steps", type=int, default=10)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tf32", action="store_true", help="with --device cuda: TF32 tensor cores")
    ap.add_argument("--bf16", action="store_true",
                    help="autocast the forward to bfloat16 (mixed precision)")
    ap.add_argument("--f16", action="store_true",
                    help="with --device cuda: autocast to float16 with a GradScaler")
    a = ap.parse_args()
    if a.f16 and (a.bf16 or a.device != "cuda"):
        ap.error("--f16 needs --device cuda and no --bf16")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch.cuda.is_available() is False")
    if a.threads < 1 or a.batch < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--threads, --batch and --steps must be >= 1, --warmup >= 0")
    return a


def read_idx_gz(path, magic_expected):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != magic_expected:
        raise ValueError(f"{path}: bad IDX magic {magic:#x}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_train(data_dir):
    """uint8 images (N,1,28,28) and int64 labels (N), as torch tensors."""
    try:
        x = read_idx_gz(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 0x803)
        y = read_idx_gz(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 0x801)
        if x.shape[0] != y.shape[0]:
            raise ValueError("image/label count mismatch")
        src = f"{data_dir} ({x.shape[0]} images)"
        x = torch.from_numpy(x.copy()).unsqueeze(1)
        y = torch.from_numpy(y.astype(np.int64))
    except (OSError, ValueError, EOFError) as e:
        print(f"warning: {e}; using random data", file=sys.stderr)
        g = torch.Generator().manual_seed(SEED)
        x = torch.randint(0, 256, (60000, 1, 28, 28), generator=g, dtype=torch.uint8)
        y = torch.randint(0, 10, (60000,), generator=g)
        src = "random (60000 images)"
    return x, y, src


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 5 * 5, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


class Trainer:
    def __init__(self, model, x, y, batch, device="cpu", bf16=False, f16=False):
        self.model, self.x, self.y, self.batch = model, x, y, batch
        self.device, self.device_type, self.bf16 = torch.device(device), device, bf16
        self.f16 = f16
        self.scaler = torch.cuda.amp.GradScaler() if f16 else None
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        self.loss_fn = nn.CrossEntropyLoss()
        self.perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(SEED))
        self.pos = 0

    def next_batch(self):
        n = self.perm.numel()
        if self.pos + self.batch > n:
            self.pos = 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += self.batch
        if self.device.type == "cpu":
            return self.x[idx].float().div_(255.0), self.y[idx]
        xb = self.x[idx].pin_memory().to(self.device, non_blocking=True)
        yb = self.y[idx].pin_memory().to(self.device, non_blocking=True)
        return xb.float().div_(255.0), yb

    def step(self):
        xb, yb = self.next_batch()
        self.opt.zero_grad(set_to_none=True)
        half = torch.float16 if self.f16 else torch.bfloat16
        with torch.autocast(self.device_type, dtype=half, enabled=self.bf16 or self.f16):
            logits = self.model(xb)
        loss = self.loss_fn(logits.float(), yb)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
            return loss
        loss.backward()
        self.opt.step()
        return loss


def profile(trainer, steps):
    from torch.autograd import profiler
    model = trainer.model
    kinds = {nn.Conv2d: "conv", nn.ReLU: "relu", nn.MaxPool2d: "pool",
             nn.Flatten: "flatten", nn.Linear: "dense"}
    names = [f"{i}:{kinds.get(type(m), type(m).__name__)}" for i, m in enumerate(model)]
    index = {m: i for i, m in enumerate(model)}
    # Forward: one profiler range per layer. Backward: remember which autograd
    # node each layer's output came from; the engine runs the nodes of one
    # name in reverse layer order, so the k-th such node of a step is the
    # k-th layer (from the top) that produced one.
    ctxs, node_of = {}, {}

    def pre(m, inp):
        ctxs[m] = profiler.record_function("fwd " + names[index[m]])
        ctxs[m].__enter__()

    def post(m, inp, out):
        ctxs.pop(m).__exit__(None, None, None)
        if out.grad_fn is not None:
            node_of[index[m]] = out.grad_fn.name()

    hooks = [m.register_forward_pre_hook(pre) for m in model]
    hooks += [m.register_forward_hook(post) for m in model]
    with profiler.profile() as prof:
        for _ in range(steps):
            with profiler.record_function("step"):
                trainer.step()
    for h in hooks:
        h.remove()

    ev = prof.key_averages()
    print(f"# profile over {steps} steps: top 15 ops by self CPU time")
    print(ev.table(sort_by="self_cpu_time_total", row_limit=15))

    layers_of = {}  # node name -> layer indices in backward order
    for i in sorted(node_of, reverse=True):
        layers_of.setdefault(node_of[i], []).append(i)
    fwd = [0.0] * len(model)
    bwd = [0.0] * len(model)
    other, seen = {}, {}
    prefix = "autograd::engine::evaluate_function: "
    for e in sorted(prof.function_events, key=lambda e: e.time_range.start):
        if e.name.startswith("fwd "):
            fwd[names.index(e.name[4:])] += e.cpu_time_total
        elif e.name.startswith(prefix):
            node = e.name[len(prefix):]
            if node in layers_of:
                k = seen.get(node, 0)
                seen[node] = k + 1
                bwd[layers_of[node][k % len(layers_of[node])]] += e.cpu_time_total
            else:
                other["bwd " + node] = other.get("bwd " + node, 0.0) + e.cpu_time_total
        elif e.name.startswith("Optimizer.step"):
            other["optimizer step"] = other.get("optimizer step", 0.0) + e.cpu_time_total
        elif e.name == "step":
            other["whole step"] = other.get("whole step", 0.0) + e.cpu_time_total
    whole = other.pop("whole step", 0.0)
    ms = lambda t: t / steps / 1000.0
    print(f"# per-layer CPU time per step (inclusive; whole step {ms(whole):.3f} ms; "
          f"bwd = the layer's autograd node)")
    print(f"#   {'layer':<12} {'fwd ms':>8} {'bwd ms':>8} {'sum ms':>8} {'share':>6}")
    for i, name in enumerate(names):
        t = fwd[i] + bwd[i]
        print(f"#   {name:<12} {ms(fwd[i]):8.3f} {ms(bwd[i]):8.3f} {ms(t):8.3f} "
              f"{100.0 * t / max(whole, 1):5.1f}%")
    for key, t in sorted(other.items(), key=lambda kv: -kv[1]):
        print(f"#   {key.replace('torch::autograd::', ''):<30} {ms(t):8.3f} {100.0 * t / max(whole, 1):5.1f}%")


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(SEED)

    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    x, y, src = load_train(a.data_dir)
    model = build_model().to(a.device)
    trainer = Trainer(model, x, y, a.batch, a.device, a.bf16, a.f16)
    nparam = sum(p.numel() for p in model.parameters())
    print(f"# torch {torch.__version__} threads={torch.get_num_threads()} "
          f"interop={torch.get_num_interop_threads()} params={nparam} data={src}")

    for _ in range(a.warmup):
        trainer.step()

    rates, done, last_loss = [], 0, float("nan")
    while done < a.steps:
        n = min(WINDOW, a.steps - done)
        if a.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            loss = trainer.step()
        last_loss = loss.item()  # waits for the device: the window's steps are all done
        dt = time.perf_counter() - t0
        rates.append(n * a.batch / dt)
        done += n
    med = statistics.median(rates)
    print(f"# windows of {WINDOW} steps, images/sec: " + " ".join(f"{r:.0f}" for r in rates))
    print(f"# min {min(rates):.0f} max {max(rates):.0f} median {med:.0f}; "
          f"ms/step {1000.0 * a.batch / med:.2f}; last loss {last_loss:.4f}")

    if a.profile:
        profile(trainer, a.profile_steps)

    print(f"peer_torch images_per_sec={med:.1f} threads={a.threads} batch={a.batch} "
          f"steps={a.steps} mkldnn={torch.backends.mkldnn.is_available()} device={a.device}"
          f"{' bf16=1' if a.bf16 else ''}{' f16=1' if a.f16 else ''}")


if __name__ == "__main__":
    main()
