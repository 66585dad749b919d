"""Optimizer and learning-rate schedule parity with real Keras (suite 'keras').

For every optimizer (and option) and every schedule: numpy makes initial weights for the
variables of a small conv + dense model and 50 steps of gradients; Keras 3 applies them with
optimizer.apply(grads, vars); tests/keras/optim_parity.c runs mwtrain's config reader,
schedule and update kernels (reference and fast CPU tables) on the same numbers from
keras.optimizers.serialize(opt). Passes when every case's weights are within 1e-4 relative
(per variable, max|mwtrain - keras| / max|keras|: float32 Adam over 50 steps is itself about
1.5e-6 away from exact arithmetic on a weight near zero, so per-element relative errors would
measure rounding, not the rule), its learning rates within 1e-5 relative, and the reference
and the fast CPU path agree bitwise. Large epsilons make where epsilon goes visible. Prints
a table of the worst errors.

usage: optim_parity.py DRIVER WORKDIR"""
import json
import os
import struct
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import numpy_draws  # noqa: E402

numpy_draws.install()  # initial weights drawn by numpy (numpy_draws.py)

O = keras.optimizers
S = keras.optimizers.schedules
SHAPES = [(3, 3, 1, 4), (4,), (36, 5), (5,)]  # Conv2D kernel, bias; Dense kernel, bias
STEPS = 50
W_TOL, LR_TOL = 1e-4, 1e-5


def cases():
    return [
        ("SGD", O.SGD(learning_rate=0.05)),
        ("SGD momentum", O.SGD(0.05, momentum=0.9)),
        ("SGD nesterov", O.SGD(0.05, momentum=0.9, nesterov=True)),
        ("SGD weight_decay", O.SGD(0.05, momentum=0.5, weight_decay=0.01)),
        ("SGD global_clipnorm", O.SGD(0.05, momentum=0.9, global_clipnorm=1.0)),
        ("Adam", O.Adam(1e-2)),
        ("Adam amsgrad", O.Adam(1e-2, amsgrad=True)),
        ("Adam clipnorm", O.Adam(1e-2, clipnorm=0.5)),
        ("Adam beta/epsilon", O.Adam(2e-2, beta_1=0.8, beta_2=0.99, epsilon=0.1)),
        ("AdamW", O.AdamW(1e-2, weight_decay=0.05)),
        ("AdamW amsgrad clipvalue", O.AdamW(1e-2, amsgrad=True, clipvalue=0.5)),
        ("RMSprop", O.RMSprop(1e-2)),
        ("RMSprop momentum centered", O.RMSprop(1e-2, momentum=0.9, centered=True)),
        ("RMSprop clipvalue wd eps", O.RMSprop(1e-2, rho=0.8, epsilon=0.1, clipvalue=0.3,
                                                weight_decay=0.02)),
        ("Adagrad", O.Adagrad(5e-2)),
        ("Adagrad options", O.Adagrad(5e-2, initial_accumulator_value=0.5, epsilon=0.1)),
        ("Adamax", O.Adamax(1e-2)),
        ("Adamax options", O.Adamax(2e-2, beta_1=0.8, beta_2=0.99, epsilon=0.1,
                                    weight_decay=0.01, clipnorm=0.5)),
        ("Adamax clipvalue schedule",
         O.Adamax(S.CosineDecay(1e-2, 30, alpha=0.1), clipvalue=0.3)),
        ("ExponentialDecay", O.SGD(S.ExponentialDecay(0.1, 10, 0.5))),
        ("ExponentialDecay staircase",
         O.SGD(S.ExponentialDecay(0.1, 10, 0.5, staircase=True))),
        ("PiecewiseConstantDecay",
         O.SGD(S.PiecewiseConstantDecay([10, 20, 35], [0.1, 0.05, 0.02, 0.01]))),
        ("PolynomialDecay",
         O.Adam(S.PolynomialDecay(1e-2, 30, end_learning_rate=1e-3, power=2.0))),
        ("PolynomialDecay cycle", O.Adam(S.PolynomialDecay(1e-2, 15, power=0.5, cycle=True))),
        ("InverseTimeDecay", O.RMSprop(S.InverseTimeDecay(1e-2, 5, 0.5))),
        ("InverseTimeDecay staircase",
         O.RMSprop(S.InverseTimeDecay(1e-2, 5, 0.5, staircase=True))),
        ("CosineDecay", O.SGD(S.CosineDecay(0.1, 40, alpha=0.1), momentum=0.9)),
        ("CosineDecay warmup",
         O.AdamW(S.CosineDecay(1e-3, 30, warmup_target=1e-2, warmup_steps=10))),
        ("CosineDecayRestarts",
         O.Adagrad(S.CosineDecayRestarts(0.1, 8, t_mul=2.0, m_mul=0.8, alpha=0.05))),
        ("CosineDecayRestarts t_mul 1", O.SGD(S.CosineDecayRestarts(0.1, 12, t_mul=1.0))),
    ]


def keras2_shape(cfg):
    """The tf.keras / Keras 2 shape of a serialized object: class_name and config only."""
    out = {"class_name": cfg["class_name"], "config": dict(cfg["config"])}
    lr = out["config"].get("learning_rate")
    if isinstance(lr, dict):
        out["config"]["learning_rate"] = keras2_shape(lr)
    return out


def run_case(i, name, opt, driver, workdir, keras2):
    rng = np.random.default_rng(1000 + i)
    init = [rng.normal(0.0, 0.5, s).astype(np.float32) for s in SHAPES]
    grads = [[(rng.normal(0.0, 1.0, s) * rng.uniform(0.1, 2.0)).astype(np.float32)
              for s in SHAPES] for _ in range(STEPS)]
    cfg = O.serialize(opt)
    if keras2:
        cfg = keras2_shape(cfg)
    variables = [keras.Variable(w) for w in init]
    opt.build(variables)
    lrs = []
    for g in grads:
        lrs.append(float(np.asarray(opt.learning_rate)))
        opt.apply(g, variables)
    final = np.concatenate([np.asarray(v.value).ravel() for v in variables])
    d = os.path.join(workdir, "case%02d" % i)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, default=float)
    with open(os.path.join(d, "case.bin"), "wb") as f:
        f.write(struct.pack("<%di" % (2 + len(SHAPES)), len(SHAPES), STEPS,
                            *[int(np.prod(s)) for s in SHAPES]))
        f.write(np.concatenate([w.ravel() for w in init]).astype("<f4").tobytes())
        for g in grads:
            f.write(np.concatenate([x.ravel() for x in g]).astype("<f4").tobytes())
        f.write(np.asarray(lrs, dtype="<f4").tobytes())
        f.write(final.astype("<f4").tobytes())
    r = subprocess.run([driver, d], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    f = r.stdout.split()
    return (float(f[1]), float(f[3]), f[5] == "1"), " ".join(f[6:])


def main():
    driver, workdir = sys.argv[1], sys.argv[2]
    rows, failed = [], 0
    all_cases = cases()
    all_cases.append(("Adam amsgrad (Keras 2 JSON)", O.Adam(1e-2, amsgrad=True)))
    all_cases.append(("CosineDecay warmup (Keras 2 JSON)",
                      O.SGD(S.CosineDecay(1e-2, 30, warmup_target=0.1, warmup_steps=10))))
    for i, (name, opt) in enumerate(all_cases):
        res, err = run_case(i, name, opt, driver, workdir, "Keras 2" in name)
        if res is None:
            rows.append((name, "driver failed: " + err))
            failed += 1
            continue
        w, lr, bitwise = res
        ok = w <= W_TOL and lr <= LR_TOL and bitwise
        failed += not ok
        rows.append((name, "%.2e   %.2e   %-8s %s" % (w, lr, "yes" if bitwise else "NO",
                                                      ("ok " if ok else "FAIL ") + err)))
    print("%-36s %-9s  %-9s  %-8s" % ("optimizer / schedule", "weights", "lr", "ref==cpu"))
    print("%-36s %-9s  %-9s" % ("", "(rel)", "(rel)"))
    for name, text in rows:
        print("%-36s %s" % (name, text))
    print("worst relative error allowed: weights %g, learning rate %g; %d case(s), %d failed"
          % (W_TOL, LR_TOL, len(rows), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
