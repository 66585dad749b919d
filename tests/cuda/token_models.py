"""Token models the fake-GPU tests train (test_hostdev_train.sh, test_hostdev_graphs.sh), as the
Keras JSON mwtrain reads: imported by their inline scripts with this folder on sys.path."""


def ref(n):
    return {"class_name": "__keras_tensor__", "config": {"keras_history": [n, 0, 0]}}


def node(*a, **kw):
    return [{"args": list(a), "kwargs": kw}]


def hub(cls, name, inb, **cfg):
    return {"class_name": cls, "name": name, "registered_name": "keras_hub>" + cls,
            "inbound_nodes": inb, "config": dict(name=name, **cfg)}


def blocks(name, dropout, steps=12):
    """Embedding(50, 8, mask_zero) -> KerasHub's TransformerEncoder(16, 2 heads) ->
    TransformerDecoder(16, 2 heads, gelu, normalize_first), both with dropout (the attention's
    probabilities and the blocks' Dropout layers), then GlobalAveragePooling1D -> Dense(3), on
    sequences of steps token ids."""
    return {"class_name": "Functional", "config": {"name": name, "layers": [
        {"class_name": "InputLayer", "name": "in", "inbound_nodes": [],
         "config": {"batch_shape": [None, steps], "dtype": "int32", "name": "in"}},
        {"class_name": "Embedding", "name": "emb", "inbound_nodes": node(ref("in")),
         "config": {"name": "emb", "input_dim": 50, "output_dim": 8, "mask_zero": True}},
        hub("TransformerEncoder", "enc", node(ref("emb")), intermediate_dim=16, num_heads=2,
            dropout=dropout),
        hub("TransformerDecoder", "dec", node(ref("enc")), intermediate_dim=16, num_heads=2,
            dropout=dropout, activation="gelu", normalize_first=True),
        {"class_name": "GlobalAveragePooling1D", "name": "gap", "inbound_nodes": node(ref("dec")),
         "config": {"name": "gap"}},
        {"class_name": "Dense", "name": "out", "inbound_nodes": node(ref("gap")),
         "config": {"name": "out", "units": 3}}],
        "input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}}
