"""`quantize("int8")` on BertEncoder and every task model, and its record in `get_config`.

Keras' post-training int8 (`keras.Model.quantize`): each Dense / EinsumDense kernel becomes
int8 with a scale per output column and each Embedding table int8 with a scale per row; the
matmuls quantize their inputs per call. Our projections are Dense / EinsumDense subclasses,
which Keras' own type check would skip (layers/lora_dense.py lets them through).

Our models are rebuilt from their arguments, not from per-layer configs, so a quantized
model's config lists its quantized layers by path ("quantization": [{"mode", "config",
"layers"}]); `from_config` builds the float model and quantizes those layers again before a
`.keras` file's int8 weights load. Encoder layers are recorded in the encoder's config, the
task head's in the task's.
"""

import contextlib
import functools
import gc
import json

import keras

from keras_bert_suite import keras_compat
from keras_bert_suite.layers.float_weights import check_mode

CONFIG_KEY = "quantization"


class QuantizableModel:
    """Mixin for BertEncoder and the task models (before keras.Model in the bases)."""

    def __new__(cls, *args, **kwargs):
        model = super().__new__(cls, *args, **kwargs)
        # Keras wraps `quantize` per instance and locks the model's attribute tracking when
        # it returns; our models stay open as they were (a preprocessor is set afterwards).
        keras_quantize = model.quantize

        @functools.wraps(keras_quantize)
        def quantize(*args, **kwargs):
            with keras_compat.state_tracking_unlocked(model), _one_garbage_collection():
                keras_quantize(*args, **kwargs)

        model.quantize = quantize
        return model

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Post-training quantization: `mode="int8"` (see keras.Model.quantize); `.keras`
        files and task presets keep the model quantized, `weight_map()` and every export
        read its weights back as floats.

        >>> from keras_bert_suite import BertClassifier
        >>> classifier = BertClassifier.from_preset(
        ...     "minilm_l6_h384_uncased", num_classes=2, sequence_length=32)
        >>> classifier.quantize("int8")
        >>> classifier.encoder.transformer_layers[0].intermediate_dense.kernel.dtype
        'int8'
        """
        check_mode(mode, type(self).__name__)
        if self.has_lora_adapters():
            raise ValueError(
                f"{type(self).__name__}.quantize: the encoder has LoRA adapters; quantize the "
                "merged model instead (keras_bert_suite.transforms.without_lora(model)).")
        # Only the layers Keras can quantize: it warns about every other one it is given.
        super().quantize(mode, config=config, filters=filters or _quantizable, **kwargs)

    def has_lora_adapters(self):
        """Whether the model's encoder carries LoRA adapters, which int8 cannot hold. Each
        model answers for itself (the encoder from its config, a task through its encoder),
        so this mixin needs to know neither class."""
        raise NotImplementedError(f"{type(self).__name__} must define has_lora_adapters().")


@contextlib.contextmanager
def _one_garbage_collection():
    """Keras frees each float kernel it replaces with a gc.collect() of its own, one per layer:
    0.7 s each in a process that holds TensorFlow, JAX and many models (16 s to quantize a
    1-layer task in the test suite). One collection after the whole model frees the same
    memory."""
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect
        gc.collect()


def _quantizable(layer):
    return isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense,
                              keras.layers.Embedding))


def refuse_quantized(model, what):
    """Pruning and masking rebuild the float model around new weights: not a quantized one."""
    if any(layer.quantization_mode is not None for layer in _own_layers(model, None)):
        raise ValueError(f"{what} of a quantized {type(model).__name__} is not supported: do "
                         "it to the float model, then quantize the result.")


def record(model, skip=None):
    """{CONFIG_KEY: [...]} for `model`'s quantized layers outside `skip`; {} if none."""
    groups = {}
    for layer in _own_layers(model, skip):
        if layer.quantization_mode is None:
            continue
        config = keras.saving.serialize_keras_object(
            getattr(layer, "quantization_config", None))
        key = (layer.quantization_mode, json.dumps(config, sort_keys=True))
        group = groups.setdefault(key, {"mode": layer.quantization_mode, "config": config,
                                        "layers": []})
        group["layers"].append(layer.path)
    return {CONFIG_KEY: list(groups.values())} if groups else {}


def restore(model, groups, skip=None):
    """Quantizes the layers a config's record names (before their weights load)."""
    for group in groups or ():
        paths = set(group["layers"])
        layers = [layer for layer in _own_layers(model, skip) if layer.path in paths]
        missing = paths - {layer.path for layer in layers}
        if missing:
            raise ValueError(
                f"The config of {type(model).__name__} lists quantized layers it does not "
                f"have: {sorted(missing)}. Was it written by another version of the model?")
        chosen = {id(layer) for layer in layers}
        model.quantize(group["mode"], config=keras.saving.deserialize_keras_object(
            group["config"]), filters=lambda layer: id(layer) in chosen)


def _own_layers(model, skip):
    skipped = {id(layer) for layer in keras_compat.all_layers(skip)} if skip is not None \
        else set()
    return [layer for layer in keras_compat.all_layers(model, include_self=False)
            if id(layer) not in skipped]
