"""PyTorch peer for mwtrain's keras.applications training-speed benchmark (bench_zoo_speed.sh).

The model is the .keras archive's own graph (config.json) written layer by layer in PyTorch, so
it is the Keras architecture exactly: ResNet50 as keras.applications builds it (ResNet v1, the
stride on each stage's first 1x1 convolution, convolutions with biases, BatchNormalization
epsilon 1.001e-5), which torchvision's resnet50 is not (v1.5: the stride on the 3x3, no
convolution biases); MobileNetV2 with Keras' padding (TensorFlow's "same": the extra row and
column of an even input at the bottom and right, the explicit ZeroPadding2D before each
stride-2 depthwise convolution). Layers: InputLayer, Conv2D, DepthwiseConv2D (groups = channels),
BatchNormalization (PyTorch's momentum = 1 - Keras'), Activation and ReLU (relu, relu6 /
max_value), ZeroPadding2D, MaxPooling2D, Add, GlobalAveragePooling2D, Dense; any other class
is an error naming it. The last Dense's softmax is left to CrossEntropyLoss (log-softmax and
the negative log-likelihood in one, as a PyTorch user writes it; Keras takes the log of the
softmax's output). Tensors are NCHW (PyTorch's default, its oneDNN convolutions); the weights
are PyTorch's default initialization, not the archive's (the speed does not depend on them).

  $(tests/bench/torch_venv.sh BUILD) tests/bench/peer_torch_zoo.py MODEL.keras DATA.npz
      [--batch 32] [--steps 10] [--threads 2]

Training: SGD(lr 0.01), consecutive batches of the .npz's x_train (uint8 NHWC, turned into
NCHW once; uint8 / 255 as each batch is assembled), torch.set_num_threads(T), 1 inter-op
thread. S untimed steps (the first touch of every buffer, oneDNN's primitive caches), then S
timed ones, as mwtrain's and Keras' epoch 2 of 2. The last line printed is

  peer_torch images_per_sec=<S x B / seconds> batch=<B> steps=<S> threads=<T>
      trainable=<parameters> torch=<version>

Before it trains, one example goes through the graph and every layer's inputs are checked
against the shapes Keras recorded in the archive (a wrong padding or stride stops it).
"""
import argparse
import json
import sys
import time
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1


def same_pad(size, k, s, d=1):
    """TensorFlow's "same" padding of one axis: (before, after)."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


class Padded(nn.Module):
    """A convolution or pooling after an asymmetric zero padding (left, right, top, bottom)."""

    def __init__(self, pad, inner):
        super().__init__()
        self.pad, self.inner = pad, inner

    def forward(self, x):
        return self.inner(F.pad(x, self.pad))


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def activation(name):
    fns = {"linear": None, "relu": F.relu, "relu6": F.relu6}
    if name not in fns:
        raise ValueError("peer_torch_zoo: activation %r is not translated" % name)
    return fns[name]


def conv(cls, c, shape):
    """Conv2D / DepthwiseConv2D of a Keras config c reading NHWC shape."""
    h, w, cin = shape[1], shape[2], shape[3]
    k, s, d = c["kernel_size"], c["strides"], c["dilation_rate"]
    if cls == "Conv2D":
        out, groups = c["filters"], c.get("groups", 1)
    else:
        out, groups = cin * c["depth_multiplier"], cin
    pad = (0, 0, 0, 0)
    if c["padding"] == "same":
        (t, b), (l, r) = same_pad(h, k[0], s[0], d[0]), same_pad(w, k[1], s[1], d[1])
        pad = (l, r, t, b)
    elif c["padding"] != "valid":
        raise ValueError("peer_torch_zoo: padding %r is not translated" % c["padding"])
    m = nn.Conv2d(cin, out, tuple(k), tuple(s), dilation=tuple(d), groups=groups,
                  bias=c["use_bias"])
    if pad[0] == pad[1] and pad[2] == pad[3]:
        m.padding = (pad[2], pad[0])
    else:
        m = Padded(pad, m)
    act = activation(c["activation"])
    return m if act is None else nn.Sequential(m, Lambda(act))


def relu(c):
    if c.get("negative_slope", 0) or c.get("threshold", 0):
        raise ValueError("peer_torch_zoo: ReLU negative_slope / threshold are not translated")
    mx = c.get("max_value")
    if mx is None:
        return Lambda(F.relu)
    return Lambda(F.relu6 if mx == 6 else (lambda x: torch.clamp(x, 0.0, mx)))


def zero_pad(c):
    (t, b), (l, r) = c["padding"]
    return Lambda(lambda x: F.pad(x, (l, r, t, b)))


def max_pool(c, shape):
    k, s = tuple(c["pool_size"]), tuple(c["strides"] or c["pool_size"])
    if c["padding"] != "valid":
        raise ValueError("peer_torch_zoo: MaxPooling2D padding %r is not translated"
                         % c["padding"])
    return nn.MaxPool2d(k, s)


def layer_module(cls, c, shape):
    if cls in ("Conv2D", "DepthwiseConv2D"):
        return conv(cls, c, shape)
    if cls == "BatchNormalization":
        return nn.BatchNorm2d(shape[-1], eps=c["epsilon"], momentum=1 - c["momentum"],
                              affine=c["center"] and c["scale"])
    if cls == "Activation":
        return Lambda(activation(c["activation"]) or (lambda x: x))
    if cls == "ReLU":
        return relu(c)
    if cls == "ZeroPadding2D":
        return zero_pad(c)
    if cls == "MaxPooling2D":
        return max_pool(c, shape)
    if cls == "Add":
        return Lambda(lambda *xs: sum(xs[1:], xs[0]))
    if cls == "GlobalAveragePooling2D":
        return Lambda(lambda x: x.mean((2, 3)))
    if cls == "Dense":
        act = c["activation"]
        if act not in ("linear", "softmax"):
            raise ValueError("peer_torch_zoo: Dense activation %r is not translated" % act)
        return nn.Linear(shape[-1], c["units"], bias=c["use_bias"])
    raise ValueError("peer_torch_zoo: Keras layer class %s is not translated" % cls)


def inbound(layer):
    """The names of the layers whose outputs this one reads, and their NHWC shapes."""
    if not layer["inbound_nodes"]:
        return [], []
    args = layer["inbound_nodes"][0]["args"]
    ts = args[0] if isinstance(args[0], list) else args
    return ([t["config"]["keras_history"][0] for t in ts],
            [t["config"]["shape"] for t in ts])


class KerasGraph(nn.Module):
    """The Functional model of a .keras archive's config.json."""

    def __init__(self, path):
        super().__init__()
        with zipfile.ZipFile(path) as z:
            cfg = json.loads(z.read("config.json"))["config"]
        self.steps, self.shapes, self.mods = [], [], nn.ModuleDict()
        self.input = cfg["input_layers"][0] if isinstance(cfg["input_layers"][0], str) \
            else cfg["input_layers"][0][0]
        self.output = cfg["output_layers"][0] if isinstance(cfg["output_layers"][0], str) \
            else cfg["output_layers"][0][0]
        for layer in cfg["layers"]:
            name, cls = layer["name"], layer["class_name"]
            if cls == "InputLayer":
                continue
            srcs, shapes = inbound(layer)
            self.mods[name] = layer_module(cls, layer["config"], shapes[0])
            self.steps.append((name, srcs))
            self.shapes.append(shapes)
        self.size = cfg["layers"][0]["config"]["batch_shape"][1:]

    def check(self):
        """One example through the graph: every layer's inputs have the shapes Keras recorded
        (NHWC there, NCHW here), so a wrong padding or stride is an error, not a slower peer."""
        h, w, c = self.size
        t = {self.input: torch.zeros(1, c, h, w)}
        self.eval()  # one example: BatchNormalization from its moving statistics
        with torch.no_grad():
            for (name, srcs), shapes in zip(self.steps, self.shapes):
                for s, want in zip(srcs, shapes):
                    got = list(t[s].shape[1:])
                    got = got[1:] + got[:1] if len(got) == 3 else got
                    if got != want[1:]:
                        raise ValueError("peer_torch_zoo: %s reads %s of shape %s, Keras %s"
                                         % (name, s, got, want[1:]))
                t[name] = self.mods[name](*(t[s] for s in srcs))

    def forward(self, x):
        t = {self.input: x}
        for name, srcs in self.steps:
            t[name] = self.mods[name](*(t[s] for s in srcs))
        return t[self.output]


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer: keras.applications training speed")
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(SEED)
    with np.load(a.data) as d:
        d_shape = d["x_train"].shape[1:]
        x = torch.from_numpy(np.ascontiguousarray(d["x_train"].transpose(0, 3, 1, 2)))
        y = torch.from_numpy(d["y_train"].astype(np.int64))
    model = KerasGraph(a.model)
    if list(x.shape[1:]) != [model.size[2]] + model.size[:2]:
        raise ValueError("peer_torch_zoo: %s holds %s images, %s takes %s (NHWC)"
                         % (a.data, list(d_shape), a.model, model.size))
    model.check()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    pos = [0]

    def step():
        if pos[0] + a.batch > x.shape[0]:
            pos[0] = 0
        xb = x[pos[0]:pos[0] + a.batch].float().div_(255.0)
        yb = y[pos[0]:pos[0] + a.batch]
        pos[0] += a.batch
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.steps):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    loss.item()
    dt = time.perf_counter() - t0
    print("peer_torch images_per_sec=%.2f batch=%d steps=%d threads=%d trainable=%d torch=%s"
          % (a.steps * a.batch / dt, a.batch, a.steps, a.threads,
             sum(p.numel() for p in model.parameters()), torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
