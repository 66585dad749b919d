"""KerasHub 0.32's LlamaTransformerDecoder made savable, for the tests that save one inside a
Functional model (llama_e2e.py, keras_keys.py, tests/data/keras/graph/gen_gradcheck.py).

Its get_config() writes "rope_scaling_factor" from an attribute its __init__ never sets (it keeps
rope_position_scaling_factor), so model.save() fails with AttributeError, and its __init__ does
not take that key back, so load_model() of such a config fails too. LlamaBackbone never calls it
(its own config holds its arguments). patch() gives the layer the attribute, the value it means
(the position scaling factor), and takes the key back as that argument: the config Keras writes
is the one KerasHub's get_config() states."""
from keras_hub.src.models.llama.llama_decoder import LlamaTransformerDecoder


def patch():
    if getattr(LlamaTransformerDecoder, "_mw_patched", False):
        return LlamaTransformerDecoder
    init = LlamaTransformerDecoder.__init__

    def __init__(self, *args, rope_scaling_factor=None, **kwargs):
        if rope_scaling_factor is not None:
            kwargs["rope_position_scaling_factor"] = rope_scaling_factor
        init(self, *args, **kwargs)
        self.rope_scaling_factor = self.rope_position_scaling_factor

    LlamaTransformerDecoder.__init__ = __init__
    LlamaTransformerDecoder._mw_patched = True
    return LlamaTransformerDecoder
