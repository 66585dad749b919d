#!/usr/bin/env python3
"""Write the empty and one-element seeds of the fuzz corpora (tests/fuzz/corpus/*/edge_*).

Every list a reader walks, at length 0 and 1, and every count at 0: a Functional model's
layers, inbound_nodes, args, keras_history, batch_shape, input_layers and output_layers, a
Sequential's layers and shapes, a layer's kernel_size, strides, target_shape and
attention_axes; a checkpoint of 0 and 1 parameters with and without a loss-scale record; an
.npy of shape (), (0,) and (0, 28, 28), an .npz with no array and with one, CIFAR with no
record and with one; TF_CONFIG clusters with no task list, an empty one and one address; a
.keras archive whose model has no layers. A reader that indexes element 0 or n - 1 of such a
list without a check shows under the fuzz build's AddressSanitizer when the corpus replays
(meson test --suite fuzz, tests/fuzz/run.sh): a Functional model with "layers": [] wrote past
a heap block that way.

    python3 tests/fuzz/gen_edge_corpus.py [CORPUS_DIR]
"""
import copy
import io
import json
import os
import struct
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def tensor(name):
    return {"class_name": "__keras_tensor__",
            "config": {"shape": [None, 4], "dtype": "float32", "keras_history": [name, 0, 0]}}


def functional():
    """Input((4,)) -> Dense(2) in Keras 3's layout."""
    inp = {"module": "keras.layers", "class_name": "InputLayer", "name": "input_layer",
           "config": {"batch_shape": [None, 4], "dtype": "float32", "sparse": False,
                      "name": "input_layer"}, "inbound_nodes": []}
    dense = {"module": "keras.layers", "class_name": "Dense", "name": "dense",
             "config": {"name": "dense", "units": 2, "activation": "linear", "use_bias": True},
             "inbound_nodes": [{"args": [tensor("input_layer")], "kwargs": {}}]}
    return {"module": "keras", "class_name": "Functional",
            "config": {"name": "f", "trainable": True, "layers": [inp, dense],
                       "input_layers": [["input_layer", 0, 0]],
                       "output_layers": [["dense", 0, 0]]}}


def sequential(layers):
    return {"class_name": "Sequential", "config": {"name": "s", "layers": layers}}


def seq_input(shape):
    return {"class_name": "InputLayer", "config": {"batch_shape": shape, "name": "in"}}


def keras_seeds():
    out = {}

    def graph(name, edit):
        m = functional()
        edit(m["config"], m["config"]["layers"])
        out[name] = m

    graph("layers_empty", lambda c, L: L.clear())
    graph("layers_one", lambda c, L: L.pop())
    graph("inbound_nodes_empty", lambda c, L: L[1].update(inbound_nodes=[]))
    graph("inbound_nodes_two", lambda c, L: L[1]["inbound_nodes"].append(
        copy.deepcopy(L[1]["inbound_nodes"][0])))
    graph("args_empty", lambda c, L: L[1]["inbound_nodes"][0].update(args=[]))
    graph("args_list_empty", lambda c, L: L[1]["inbound_nodes"][0].update(args=[[]]))
    graph("args_list_one", lambda c, L: L[1]["inbound_nodes"][0].update(
        args=[[tensor("input_layer")]]))
    graph("keras_history_empty", lambda c, L: L[1]["inbound_nodes"][0]["args"][0]["config"]
          .update(keras_history=[]))
    graph("keras_history_one", lambda c, L: L[1]["inbound_nodes"][0]["args"][0]["config"]
          .update(keras_history=["input_layer"]))
    graph("legacy_node_empty", lambda c, L: L[1].update(inbound_nodes=[[]]))
    graph("legacy_ref_one", lambda c, L: L[1].update(inbound_nodes=[[["input_layer"]]]))
    graph("batch_shape_empty", lambda c, L: L[0]["config"].update(batch_shape=[]))
    graph("batch_shape_one", lambda c, L: L[0]["config"].update(batch_shape=[None]))
    graph("input_layers_empty", lambda c, L: c.update(input_layers=[]))
    graph("input_layers_inner_empty", lambda c, L: c.update(input_layers=[[]]))
    graph("input_layers_one", lambda c, L: c.update(input_layers=["input_layer", 0, 0]))
    graph("output_layers_empty", lambda c, L: c.update(output_layers=[]))
    graph("output_layers_inner_empty", lambda c, L: c.update(output_layers=[[]]))
    graph("output_layers_one", lambda c, L: c.update(output_layers=["dense"]))
    graph("layers_object", lambda c, L: c.update(layers={}))
    out["config_empty"] = {"class_name": "Functional", "config": {}}
    out["seq_layers_empty"] = sequential([])
    out["seq_input_only"] = sequential([seq_input([None, 4])])
    out["seq_shape_empty"] = sequential([seq_input([]), {"class_name": "Dense",
                                                          "config": {"units": 2}}])
    out["seq_shape_one"] = sequential([seq_input([None]), {"class_name": "Dense",
                                                            "config": {"units": 2}}])
    for key, val in [("kernel_size", []), ("kernel_size", [3]), ("strides", []),
                     ("dilation_rate", [])]:
        conv = {"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": [3, 3], key: val}}
        out["seq_conv_%s_%d" % (key, len(val))] = sequential(
            [seq_input([None, 8, 8, 1]), conv, {"class_name": "Flatten", "config": {}},
             {"class_name": "Dense", "config": {"units": 2}}])
    for key, val in [("pool_size", []), ("pool_size", [2])]:
        out["seq_pool_%s_%d" % (key, len(val))] = sequential(
            [seq_input([None, 8, 8, 1]), {"class_name": "MaxPooling2D", "config": {key: val}},
             {"class_name": "Flatten", "config": {}},
             {"class_name": "Dense", "config": {"units": 2}}])
    for val in ([], [4]):
        out["seq_reshape_%d" % len(val)] = sequential(
            [seq_input([None, 4]), {"class_name": "Reshape", "config": {"target_shape": val}},
             {"class_name": "Flatten", "config": {}},
             {"class_name": "Dense", "config": {"units": 2}}])
    for val in ([], [1]):
        out["seq_mha_axes_%d" % len(val)] = sequential(
            [seq_input([None, 3, 4]),
             {"class_name": "MultiHeadAttention",
              "config": {"num_heads": 1, "key_dim": 4, "attention_axes": val}},
             {"class_name": "Flatten", "config": {}},
             {"class_name": "Dense", "config": {"units": 2}}])
    return out


def ckpt_section(tag, raw):
    comp = zlib.compress(raw)
    return struct.pack("<8sQQI", tag.encode(), len(comp), len(raw), zlib.crc32(raw)) + comp


def ckpt(nparams, lscale=None):
    meta = struct.pack("<16sQQIIqqqqQqdQ", b"sgd", nparams, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0.01, 0)
    secs = [("meta", meta), ("model", b""), ("params", struct.pack("<%df" % nparams,
                                                                    *[0.5] * nparams))]
    if lscale is not None:
        secs.append(("lscale", struct.pack("<dq", *lscale)))
    return b"MWCKPT\x00\x01" + struct.pack("<II", 1, len(secs)) + b"".join(
        ckpt_section(t, r) for t, r in secs)


def checkpoint_seeds():
    return {"params_0": ckpt(0), "params_1": ckpt(1), "params_0_lscale": ckpt(0, (32768.0, 0)),
            "params_1_lscale_max_steps": ckpt(1, (1.0, 999999999))}


def npy(shape, descr="<f4"):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    count = 1
    for d in shape:
        count *= d
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + \
        b"\x00" * (4 * count)


def npz(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


def data_seeds():
    # first byte: the reader (fuzz_data.c: 0 .npy, 2 .npz, 4 CIFAR-10)
    one = npy((1, 2, 2))
    return {"npy_scalar": b"\x00" + npy(()), "npy_empty_1d": b"\x00" + npy((0,)),
            "npy_empty_images": b"\x00" + npy((0, 28, 28)), "npy_one": b"\x00" + one,
            "npz_no_arrays": b"\x02" + npz([]),
            "npz_one_array": b"\x02" + npz([("x_train.npy", one)]),
            "npz_empty_arrays": b"\x02" + npz([(k + ".npy", npy((0, 2, 2)) if k[0] == "x"
                                                 else npy((0,), "<i4"))
                                                for k in ("x_train", "y_train", "x_test",
                                                          "y_test")]),
            "npz_named_inputs": b"\x02" + npz(
                [(k, npy((2, 3), "<i4") if k[0] == "x" else npy((2,), "<i4"))
                 for k in ("x_train.ids.npy", "x_train.mask.npy", "y_train.npy",
                           "x_test.ids.npy", "x_test.mask.npy", "y_test.npy")]),
            "cifar_no_record": b"\x04", "cifar_one_record": b"\x04" + bytes(3073)}


def tfconfig_seeds():
    t = {"type": "worker", "index": 0}
    return {"cluster_empty": {"cluster": {}, "task": t},
            "workers_empty": {"cluster": {"worker": []}, "task": t},
            "workers_one": {"cluster": {"worker": ["localhost:2222"]}, "task": t},
            "task_empty": {"cluster": {"worker": ["localhost:2222"]}, "task": {}},
            "empty": {}}


def archive_seeds():
    with open(os.path.join(HERE, "corpus", "keras_archive", "good.keras"), "rb") as f:
        good = f.read()
    out = {}
    def functional_empty(c):
        c.clear()
        c.update(functional())
        c["config"]["layers"].clear()

    for name, edit in [("layers_empty", lambda c: c["config"].update(layers=[])),
                       ("layers_input_only", lambda c: c["config"].update(
                           layers=c["config"]["layers"][:1])),
                       ("functional_layers_empty", functional_empty)]:
        src, buf = zipfile.ZipFile(io.BytesIO(good)), io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for info in src.infolist():
                data = src.read(info.filename)
                if info.filename == "config.json":
                    c = json.loads(data)
                    edit(c)
                    data = json.dumps(c).encode()
                z.writestr(info.filename, data)
        out[name] = buf.getvalue()
    return out


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    if not isinstance(data, bytes):
        data = json.dumps(data).encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    for folder, seeds, ext in [("keras", keras_seeds(), ".json"),
                               ("checkpoint", checkpoint_seeds(), ".ckpt"),
                               ("data", data_seeds(), ""),
                               ("tfconfig", tfconfig_seeds(), ".json"),
                               ("keras_archive", archive_seeds(), ".keras")]:
        for name, data in seeds.items():
            write(os.path.join(corpus, folder), "edge_" + name + ext, data)


if __name__ == "__main__":
    main()
