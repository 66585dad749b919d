"""mixed_float16: mwtrain's float16 roundings and dynamic loss scaling against Keras' own.

Keras (JAX) builds the tutorial CNN under the dtype policy mixed_float16 and saves it; mwtrain
reads each layer's policy from that archive and computes in float16 values on its reference
backend (the CPU's fast kernels refuse mixed_float16; the GPU computes the same values on
tensor cores). The data set is one global batch of 64 Fashion-MNIST images, so each step is
the mean over those images whatever the shuffle.

As for mixed_bfloat16 (keras_bf16.py), the oracle has two parts:
1. an emulation in float32 JAX ops that rounds to float16 exactly where Keras holds a float16
   tensor (the input, each layer's output and output gradient, the weights at use, the
   weights' gradients) must give the gradients of Keras' own mixed_float16 model, of the loss
   times Keras' default scale 2^15, for every kernel within one float16 step (2u, u = 2^-11:
   float16 has 11 significant bits); XLA sums the biases' gradients in float16, so those are
   printed only;
2. mwtrain trains STEPS epochs of one step (from initial_scale 2^28, dynamic_growth_steps 3,
   SGD at learning rate LR, as --optimizer-config), a checkpoint after each: the scaled
   gradients overflow float16 at first, so 6 steps are skipped and the scale halves, then it
   doubles after 3 finite steps and overflows again. Keras' own LossScaleOptimizer takes each
   step from mwtrain's weights before it, with the emulation's gradients there (float32
   weight gradients, as mwtrain's), carrying its own state: after every step mwtrain's loss
   scale (the checkpoint's lscale section, and the log line) must equal Keras'
   dynamic_scale exactly, a step Keras skips must leave mwtrain's weights bitwise unchanged,
   and a finite step must change every variable as Keras' does within TOL. (Keras' own
   weights' gradients are float16 tensors, which overflow sooner: at this run's scale 2^22
   its convolutions' are infinite where mwtrain's float32 ones are finite, so Keras' own
   model would skip steps that mwtrain takes; mwtrain skips only where a float16 tensor of
   the model overflows: docs/mixed-precision.md.)

The tolerance: both round the same float32 values, which differ only by float32 summation
order (about 1e-7 relative), so an element rounds differently only when it straddles a float16
boundary, a fraction of about 1e-7 / 2u = 1e-4 of the elements, and then by one step (2u).
An element of a change is a sum of at least 64 products; with one of them off by 2u of itself
(most sums have none), it moves by at most 2u of the largest change: TOL = 2u = 9.8e-4,
measured up to 2.3e-4 (the last Dense kernel, whose sums are the shortest), 1e-5 elsewhere.
The control keeps its power to fail: mwtrain in float32 (no scaling, no skipped step) differs
from Keras' first step by far more than TOL (5.7e-2).

Also: --resume continues the loss scale (the checkpoint's lscale section, its growth count
included): HALF epochs, then --resume to STEPS, ends with the same weights, bitwise, as the run
straight through, and the scales go on from the checkpoint's; HALF falls after 2 of the 3
finite steps that double the scale, so a count lost at the restart delays that doubling, and
without the scale itself it would restart at 2^28 and skip again. And the exported .keras
keeps the policy (Keras reads mixed_float16 on every layer).

Last, an overflow in the FORWARD (part 4 below): Keras' loss is not finite there and its
LossScaleOptimizer skips the step; mwtrain skips it too instead of ending the run as diverged,
and the step after it is bitwise the one a run without the overflowing batch takes.
"""
import filecmp
import json
import os
import re
import subprocess

import jax
import jax.numpy as jnp
import keras
import numpy as np

import numpy_draws
import oracle as o

# Keras' own JAX draws of the initial weights (oracle.py installs numpy's). With other weights
# (numpy_draws.py's), one step of part 2 differed by 1.12e-3 > TOL in conv2d's bias, and by up
# to 30x its usual error in every other variable, all other steps within 1.5e-4. Not float32
# summation order: the emulation with its batch permuted moved conv2d's bias by 2e-7. The likely
# cause, which TOL's argument leaves out: a pre-activation within float32's rounding of 0
# (about 1e-7 of the conv's scale; conv2d has 1.4M of them a step) that ReLU decides one way
# on one side and the other way on the other, moving that image's whole gradient there. On
# these weights no step meets one.
numpy_draws.uninstall()

LR = 0.05
U = 2.0 ** -11
TOL = 2 * U
# A skipped step leaves the weights as they were, so the initial scale only sets how many
# steps are skipped before the first finite one (at 2^22 on these weights): from 2^28, 6 of
# them; 2^40 took 18 more, each a full step on the reference backend, for the same finite steps.
STEPS, HALF = 12, 8
INITIAL, GROWTH = 2.0 ** 28, 3

xb, yb, d, data = o.one_batch_data()

model, path, w0, ntv = o.policy_cnn("mixed_float16", d)


def keras_loss(tv_, scale):
    pred, _ = model.stateless_call(tv_, ntv, xb, training=False)
    pred = pred.astype("float32")  # Keras' loss computes in float32
    return scale * keras.losses.sparse_categorical_crossentropy(yb, pred, from_logits=True).mean()


r16, w16 = o.half_casts(jnp.float16)  # a float16 tensor; a variable cast at use


def pool(h):
    return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def emulated(tv_, wcast, scale):
    """The tutorial CNN in float32 JAX ops with float16 roundings where Keras has float16
    tensors (the roundings mwtrain makes, worker/model/model.c); the loss times scale. A layer's
    activation reads its float16 pre-activation: a value that underflows to 0 has ReLU's
    zero slope (2^-26 is positive in float32), as in Keras, whose layer adds its bias in
    float16 before the activation."""
    k1, b1, k2, b2, k3, b3, k4, b4 = tv_
    dn = ("NHWC", "HWIO", "NHWC")

    def conv(h, k, b):
        return jax.lax.conv_general_dilated(h, wcast(k), (1, 1), "VALID", dimension_numbers=dn) + wcast(b)

    h = r16(jnp.asarray(xb))
    h = r16(pool(r16(jax.nn.relu(r16(conv(h, k1, b1))))))
    h = r16(pool(r16(jax.nn.relu(r16(conv(h, k2, b2)))))).reshape(64, -1)
    h = r16(jax.nn.relu(r16(h @ wcast(k3) + wcast(b3))))
    h = r16(h @ wcast(k4) + wcast(b4))
    return scale * keras.losses.sparse_categorical_crossentropy(yb, h, from_logits=True).mean()


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a - b).max() / np.abs(b).max()


# 1. The emulation against Keras' own mixed_float16 at w0, both rounding the weights'
#    gradients as Keras does, the loss scaled by Keras' default 2^15.
tv0 = [v.value for v in model.trainable_variables]
g_keras = jax.grad(keras_loss)(tv0, 2.0 ** 15)
g_emu = jax.grad(lambda t: emulated(t, r16, 2.0 ** 15))(tv0)
for v, a, b in zip(model.trainable_variables, g_emu, g_keras):
    err = rel(a, b)
    if v.path.endswith("kernel"):
        o.check(err <= 2 * U, f"emulation vs Keras mixed_float16, gradient of {v.path}: {err:.2e} <= {2 * U:.2e}")
    else:
        print(f"      emulation vs Keras mixed_float16, gradient of {v.path}: {err:.2e} (Keras sums it in float16)")

# 2. mwtrain trains STEPS epochs of one step, a checkpoint after each (its weights and its
#    loss-scale state); Keras' LossScaleOptimizer takes each step from mwtrain's weights
#    before it, with the emulation's gradients there: the same scale after every step
#    (Keras' own state machine, carried on its side), a skipped step leaves mwtrain's
#    weights bitwise unchanged, and a finite step changes them as Keras' does within TOL.
#    Compared step by step at the same weights: over several steps, float16's rounding of
#    the weights amplifies float32 summation-order noise (1e-7) into differences of 1e-3
#    (measured), for Keras against itself as much.
def read_ckpt(path):
    """(params float32, loss scale or None) of a checkpoint (docs/checkpoint.md)."""
    import struct
    import zlib
    b = open(path, "rb").read()
    count = struct.unpack_from("<I", b, 12)[0]
    off, sec = 16, {}
    for _ in range(count):
        tag = b[off:off + 8].rstrip(b"\0").decode()
        comp = struct.unpack_from("<Q", b, off + 8)[0]
        sec[tag] = zlib.decompress(b[off + 28:off + 28 + comp])
        off += 28 + comp
    scale = struct.unpack_from("<d", sec["lscale"])[0] if "lscale" in sec else None
    return np.frombuffer(sec["params"], "<f4").astype(np.float64), scale


lso = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(LR), initial_scale=INITIAL,
                                          dynamic_growth_steps=GROWTH)
lso.build(model.trainable_variables)
i_scale = next(i for i, v in enumerate(lso.variables) if v.path.endswith("dynamic_scale"))
grad = jax.jit(jax.grad(lambda t, s: emulated(t, w16, s)))
lso_json = os.path.join(d, "lso.json")
with open(lso_json, "w") as f:
    json.dump(keras.optimizers.serialize(lso), f)


def run_mwtrain(run, epochs, *extra):
    dump = os.path.join(run, "w.bin")
    args = [o.MWTRAIN, "train", "--model", path, "--data-dir", data, "--epochs", str(epochs),
            "--batch-per-replica", "64", "--optimizer-config", lso_json, "--dump-weights", dump,
            "--summary-dir", "", "--checkpoint-every-epochs", "1", "--keep-checkpoints", "0",
            "--checkpoint-dir", os.path.join(run, "ck"), "--progress", "none", "--threads", "1",
            "--backend", "ref", *extra]
    p = subprocess.run(args, cwd=run, capture_output=True, text=True)
    return p, dump


def shaped(flat):
    out, off = [], 0
    for v in model.trainable_variables:
        n = int(np.prod(v.shape))
        out.append(flat[off:off + n].reshape(v.shape))
        off += n
    return out


def step_errors(wa, wb, kd):
    """Per variable max |(wb - wa) - kd| / max |kd|, and the relative L2 over all."""
    errs, num, den = [], 0.0, 0.0
    for v, a, b, k in zip(model.trainable_variables, shaped(wa), shaped(wb), kd):
        md = b - a
        errs.append((v.path, np.abs(md - k).max() / max(np.abs(k).max(), 1e-300)))
        num += ((md - k) ** 2).sum()
        den += (k ** 2).sum()
    return errs, np.sqrt(num / max(den, 1e-300))


results = {}
# the control's first step is all it compares
for tag, epochs, extra in [("ref mixed_float16", STEPS, []),
                           ("ref float32 (control)", 1, ["--dtype-policy", "float32"])]:
    run = o.workdir()
    p, dump = run_mwtrain(run, epochs, *extra)
    if p.returncode != 0:
        o.check(False, f"{tag}: mwtrain exit {p.returncode}: {p.stderr[-600:]}")
        continue
    scales = [float(s) for s in re.findall(r"epoch \d+: loss scale (\S+) after", p.stderr)]
    results[tag] = (run, scales, dump)

k_scales, worst, skipped = [], {}, 0
if "ref mixed_float16" in results:
    run = results["ref mixed_float16"][0]
    opt_vars = [v.value for v in lso.variables]
    w_prev = w0.astype(np.float64)
    for k in range(STEPS):
        w_next, m_scale = read_ckpt(os.path.join(run, "ck", f"ckpt-{k + 1}"))
        tv = [jnp.asarray(x, jnp.float32) for x in shaped(w_prev)]
        scale = opt_vars[i_scale]
        g = grad(tv, scale)
        finite = all(bool(jnp.all(jnp.isfinite(x))) for x in g)
        tv_new, opt_vars = lso.stateless_apply(opt_vars, g, tv)
        k_scales.append(float(opt_vars[i_scale]))
        if not finite:
            skipped += 1
            o.check(np.array_equal(w_next, w_prev), f"step {k + 1}, skipped by Keras: mwtrain's "
                    f"weights unchanged")
        else:
            kd = [np.asarray(a, np.float64) - np.asarray(b, np.float64) for a, b in zip(tv_new, tv)]
            e_, l2_ = step_errors(w_prev, w_next, kd)
            print(f"      step {k + 1} at scale {float(scale):g}: worst {max(x for _, x in e_):.2e}, relative L2 {l2_:.2e}")
            for name, err in e_:
                worst[name] = max(worst.get(name, 0.0), err)
        o.check(m_scale == k_scales[-1], f"step {k + 1}: mwtrain's loss scale {m_scale} == "
                f"Keras' dynamic_scale {k_scales[-1]}")
        w_prev = w_next
    print(f"Keras: {skipped} of {STEPS} steps skipped; scales {k_scales}")
    o.check(0 < skipped < STEPS - 4 and max(k_scales[-6:]) > min(k_scales[-6:]),
            "the run exercises both halving and doubling")
    o.check(results["ref mixed_float16"][1] == k_scales, "the log's loss scale after each epoch "
            "is the checkpoint's")
    print(f"finite steps against Keras' LossScaleOptimizer at mwtrain's weights (tolerance "
          f"{TOL:.2e} = 2u):")
    for name, err in worst.items():
        o.check(err <= TOL, f"mixed_float16: change of {name}: worst relative error {err:.2e} <= {TOL:.2e}")
    # the control: float32 mwtrain's first step against Keras' mixed_float16 first step
    if "ref float32 (control)" in results:
        run32 = results["ref float32 (control)"][0]
        w1_32 = read_ckpt(os.path.join(run32, "ck", "ckpt-1"))[0]
        lso2 = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(LR), initial_scale=2.0 ** 15)
        lso2.build(model.trainable_variables)
        tv = [jnp.asarray(x, jnp.float32) for x in shaped(w0.astype(np.float64))]
        # at 2^15 no step overflows: the first finite step of each, from w0
        g = grad(tv, 2.0 ** 15)
        tv1, _ = lso2.stateless_apply([v.value for v in lso2.variables], g, tv)
        kd = [np.asarray(a, np.float64) - np.asarray(b, np.float64) for a, b in zip(tv1, tv)]
        ctrl_errs, ctrl = step_errors(w0.astype(np.float64), w1_32, kd)
        cw = max(e for _, e in ctrl_errs)
        print(f"  control: float32 mwtrain's first step vs Keras mixed_float16's: worst {cw:.2e}, relative L2 {ctrl:.2e}")
        o.check(cw > TOL, f"control: float32 mwtrain's first step differs from Keras' by more "
                f"than TOL ({cw:.2e} > {TOL:.2e})")
        o.check(results["ref float32 (control)"][1] == [], "float32 scales no loss (no loss-scale lines)")

if "ref mixed_float16" in results:
    run, scales, dump = results["ref mixed_float16"]
    # --resume continues the loss scale
    run2 = o.workdir()
    p1, _ = run_mwtrain(run2, HALF)
    p2, dump2 = run_mwtrain(run2, STEPS, "--resume")
    o.check(p1.returncode == 0 and p2.returncode == 0,
            f"half, then --resume: exit {p1.returncode}, {p2.returncode}: {p2.stderr[-400:]}")
    o.check(p2.returncode == 0 and filecmp.cmp(dump, dump2, shallow=False),
            "half, then --resume to the end: the same weights as straight through, bitwise")
    resumed = [float(s) for s in re.findall(r"epoch \d+: loss scale (\S+) after", p2.stderr)]
    o.check(resumed == k_scales[HALF:] and k_scales[HALF] > k_scales[HALF - 1],
            f"the resumed run's scales go on from the checkpoint's, its first doubling the "
            f"scale: {resumed} vs {k_scales[HALF:]}")

    out = os.path.join(run, "out.keras")
    o.mwtrain("export", "--checkpoint-dir", os.path.join(run, "ck"), "--format", "keras",
              "--output", out, cwd=run)
    got = sorted({l.dtype_policy.name for l in keras.saving.load_model(out).layers})
    o.check(got == ["mixed_float16"], f"export --format keras: Keras reads the policies {got}")

# 4. A float16 overflow in the FORWARD is a skipped step, as Keras' LossScaleOptimizer makes it
#    (the loss and so every gradient are not finite), not a diverged run. Two batches in file
#    order (--no-shuffle): A, the 64 images, and B, the same images at a quarter of their
#    brightness. The CNN's biases start at 0 and ReLU and max pooling are positively
#    homogeneous, so B's logits are about A's / 4: with the last Dense kernel made positive (no
#    partial sum exceeds the logit: the hidden units are ReLU outputs) and scaled so that Keras'
#    own mixed_float16 logits on A reach 1.2 times float16's largest value (the kernel's own
#    values stay below it), A's overflow and B's (about 0.3 of it) do not. Keras says so (its loss on A is not finite, on B finite),
#    and its LossScaleOptimizer (Adam inside, initial_scale 1) skips A and halves the scale.
#    mwtrain (the reference backend) must then: exit 0, leave the weights after step 1 bitwise
#    the initial ones with the scale Keras has (0.5), log the skipped step, and end step 2 with
#    the weights of a run that takes B alone from scale 0.5: the skipped step advanced nothing,
#    Adam's iteration count included; its epoch loss is B's alone (that run's), finite.
xa = np.round(xb[..., 0] * 255).astype(np.uint8)
xb4 = xa // 4
d4 = o.workdir()
data_ab, data_b = os.path.join(d4, "ab"), os.path.join(d4, "b")
# the test set dim too: a test loss that is not finite still ends the run (nothing scales it)
o.write_idx_dir(data_ab, np.concatenate([xa, xb4]), np.concatenate([yb, yb]), xb4[:16], yb[:16])
o.write_idx_dir(data_b, xb4, yb, xb4[:16], yb[:16])
last = model.layers[-1]
k_last = np.abs(np.asarray(last.kernel.value))  # positive: the products only grow, as the sums
last.kernel.assign(k_last)
xa_in, xb_in = xa[..., None] / 255.0, xb4[..., None] / 255.0
logit_a = float(np.abs(np.asarray(model(xa_in.astype("float32"))).astype(np.float64)).max())
c = 1.2 * 65504.0 / logit_a  # the kernel itself stays a float16 value (checked below)
last.kernel.assign(k_last * c)
big = os.path.join(d4, "big.keras")
model.save(big)
w_big = o.flat_weights(model)
tv_big = [v.value for v in model.trainable_variables]


def keras_loss_on(tv_, x):
    pred, _ = model.stateless_call(tv_, ntv, x.astype("float32"), training=False)
    return keras.losses.sparse_categorical_crossentropy(yb, pred.astype("float32"),
                                                        from_logits=True).mean()


la, lb = float(keras_loss_on(tv_big, xa_in)), float(keras_loss_on(tv_big, xb_in))
o.check(not np.isfinite(la) and np.isfinite(lb) and c * k_last.max() < 65504,
        f"Keras mixed_float16 with the last kernel x {c:.3g} (largest {c * k_last.max():.0f}): "
        f"loss on A {la} (overflow), on B {lb}")
lso4 = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3), initial_scale=1.0,
                                           dynamic_growth_steps=1000)
lso4.build(model.trainable_variables)
g_a = jax.grad(lambda t: keras_loss_on(t, xa_in))(tv_big)  # Keras' own: not finite
v4 = [v.value for v in lso4.variables]
tv_a, v4 = lso4.stateless_apply(v4, g_a, tv_big)
i4 = next(i for i, v in enumerate(lso4.variables) if v.path.endswith("dynamic_scale"))
k_scale = float(v4[i4])
o.check(all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(tv_a, tv_big)) and
        k_scale == 0.5, f"Keras' LossScaleOptimizer skips A (weights unchanged) and halves the "
        f"scale: {k_scale}")


def lso_json_at(scale):
    f = os.path.join(d4, f"lso-{scale}.json")
    with open(f, "w") as fh:
        json.dump(keras.optimizers.serialize(keras.optimizers.LossScaleOptimizer(
            keras.optimizers.Adam(1e-3), initial_scale=scale, dynamic_growth_steps=1000)), fh)
    return f


def run4(data_dir, scale, tag):
    run = o.workdir()
    args = [o.MWTRAIN, "train", "--model", big, "--data-dir", data_dir, "--epochs", "1",
            "--batch-per-replica", "64", "--no-shuffle", "--optimizer-config", lso_json_at(scale),
            "--dump-weights", os.path.join(run, "w.bin"), "--summary-dir", "",
            "--checkpoint-every-steps", "1", "--checkpoint-every-epochs", "1",
            "--keep-checkpoints", "0", "--checkpoint-dir", os.path.join(run, "ck"),
            "--progress", "none", "--threads", "1", "--backend", "ref"]
    p = subprocess.run(args, cwd=run, capture_output=True, text=True)
    o.check(p.returncode == 0, f"{tag}: exit {p.returncode} (0: a skipped step, not diverged): "
            f"{p.stderr[-500:]}")
    loss = re.findall(r"^Epoch 1, Loss: (\S+),", p.stdout + p.stderr, re.M)
    return run, p, float(loss[0]) if loss else None


run_ab, p_ab, loss_ab = run4(data_ab, 1.0, "A then B")
run_b, p_b, loss_b = run4(data_b, 0.5, "B alone from scale 0.5")
if p_ab.returncode == 0 and p_b.returncode == 0:
    w1, s1 = read_ckpt(os.path.join(run_ab, "ck", "ckpt-1"))
    o.check(np.array_equal(w1, w_big.astype(np.float64)) and s1 == k_scale,
            f"step 1 (A, overflowing in the forward): weights unchanged, loss scale {s1} == "
            f"Keras' {k_scale}")
    o.check("after 1 step(s) skipped for non-finite gradients" in p_ab.stderr,
            "the log counts the skipped step")
    wab = np.fromfile(os.path.join(run_ab, "w.bin"), np.uint8)
    wb_ = np.fromfile(os.path.join(run_b, "w.bin"), np.uint8)
    moved = read_ckpt(os.path.join(run_ab, "ck", "ckpt-2"))[0]
    o.check(np.array_equal(wab, wb_) and not np.array_equal(moved, w1),
            "step 2 (B) ends with the weights of B alone from scale 0.5, bitwise (and moved them)")
    o.check(loss_ab is not None and np.isfinite(loss_ab) and loss_ab == loss_b,
            f"the epoch loss is B's alone: {loss_ab} == {loss_b}")
o.finish()
