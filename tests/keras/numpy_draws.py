"""Keras' initial weights drawn the way its numpy backend draws them, in the JAX backend.

Keras' JAX backend draws every initializer's values with jax.random, and XLA compiles one
program per weight shape: 0.3 to 0.9 s each on a 2-core runner. A test that builds models of
many shapes spent most of its time there: keras-parity took 312 s, and 105 s with these draws
(keras-zoo 208 and 145 s, keras-hub-models 179 and 133 s; the three under meson, two at a time,
the compile cache empty). install() makes keras.random's normal, uniform and truncated_normal,
called outside a traced function, draw as Keras' numpy backend does: numpy's generator seeded
with the Keras seed drawn as before (keras.utils.set_random_seed and each initializer's seed
still decide the values, so a run is as reproducible as before), and the numpy backend's
formulas, written out below (its functions take a Keras seed, not a drawn key). The values
differ from jax.random's.

The oracle tests compare mwtrain with Keras from the same weights, written to the archive or
the weights file after Keras drew them, so which values were drawn does not change what they
check. Inside a traced function (a jitted step: GaussianNoise, a layer's draws in fit) the
seed is a tracer and the JAX draw runs unchanged."""
import inspect
import math

import jax
import numpy as np
from keras.src.backend.config import floatx
from keras.src.backend.jax import random as jax_random


def _generator(key):
    """numpy's generator seeded with a drawn Keras seed (a JAX key: the seed and a counter)."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.random.default_rng([int(w) & 0xFFFFFFFF for w in np.asarray(key).ravel()])


# Keras' numpy backend's formulas (keras/src/backend/numpy/random.py): numpy's normal and
# uniform, and the normal truncated to mean +- 2 stddev by redrawing outside it
def _normal(rng, shape, mean=0.0, stddev=1.0):
    return rng.normal(loc=mean, scale=stddev, size=shape)


def _uniform(rng, shape, minval=0.0, maxval=1.0):
    return rng.uniform(low=minval, high=maxval, size=shape)


def _truncated_normal(rng, shape, mean=0.0, stddev=1.0):
    n, kept = math.prod(shape), np.empty(0)
    while kept.size < n:
        batch = rng.normal(loc=mean, scale=stddev, size=n)
        kept = np.append(kept, batch[(batch >= mean - 2 * stddev) & (batch <= mean + 2 * stddev)])
    return kept[:n].reshape(shape)


_NUMPY = {"normal": _normal, "uniform": _uniform, "truncated_normal": _truncated_normal}


def _numpy_or_jax(name):
    jax_draw, numpy_draw = getattr(jax_random, name), _NUMPY[name]
    signature = inspect.signature(jax_draw)

    def draw(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = dict(bound.arguments)
        key = jax_random.jax_draw_seed(a.pop("seed"))
        if isinstance(key, jax.core.Tracer):  # drawn once: the generator's state moves once
            return jax_draw(**a, seed=key)
        dtype = a.pop("dtype") or floatx()
        values = numpy_draw(_generator(key), tuple(a.pop("shape")), **a)
        return jax.numpy.asarray(values.astype(dtype))

    draw.__name__ = name
    draw.numpy_draws = True
    return draw


_JAX = {name: getattr(jax_random, name) for name in _NUMPY}


def uninstall():
    """keras.random's JAX draws back (a test whose measured numbers depend on the weights Keras'
    JAX backend draws)."""
    for name, jax_draw in _JAX.items():
        setattr(jax_random, name, jax_draw)


def install():
    """Once per process: keras.random's normal, uniform and truncated_normal outside a trace
    draw with numpy (the module's docstring)."""
    for name in _NUMPY:
        if not getattr(getattr(jax_random, name), "numpy_draws", False):
            setattr(jax_random, name, _numpy_or_jax(name))
