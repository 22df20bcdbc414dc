"""Base class for layers that run TensorFlow ops under every Keras backend.

Text preprocessing is TensorFlow (+ tensorflow-text) code whatever the Keras backend is, so it
runs in `tf.data` and inside exported SavedModels. These layers therefore take TensorFlow or
Python inputs as they are (no conversion to the backend's tensors) and have no weights.
"""

import collections
import contextlib
import hashlib
import json

import keras
import numpy as np
import tensorflow as tf


STRINGS = tf.TensorSpec([None], tf.string)
# Traced graphs shared by layers with equal configs (see PreprocessingLayer.compiled), the
# most recently used kept.
_SHARED_GRAPHS = collections.OrderedDict()
_SHARED_GRAPHS_KEPT = 64


class PreprocessingLayer(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True  # nothing to build: no weights
        self._compiled_functions = {}

    def __call__(self, *args, **kwargs):
        # Eager calls skip Keras' Layer.__call__: its bookkeeping (input structure walks, dtype
        # casts, masks) does nothing for a weightless text layer, yet cost 4.7 ms per call on
        # a list of 256 strings, twice the tokenization itself. Symbolic and graph calls
        # (functional models, tf.data, tf.function) keep it.
        if tf.executing_eagerly() and not any(
                isinstance(x, keras.KerasTensor) for x in keras.tree.flatten((args, kwargs))):
            return self.call(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    def compiled(self, name, fn, input_signature=(STRINGS,)):
        """`fn` as one traced graph, cached under `name`, for inputs that match
        `input_signature`; other inputs (a scalar where the graph takes [B]) get `fn` itself.

        Eagerly, op-by-op dispatch costs more than the work itself on small batches (an eager
        `tokenizer(texts)` ran at 8.7 MB/s op by op, 22 MB/s as one graph). Inside a graph
        (tf.data, tf.function, a SavedModel being traced) the cached graph is called as a
        function: tf.data traces a new map function for every pipeline, and rebuilding the
        tokenizer's ops each time cost seconds per `fit` / `predict` call on raw text.

        Layers of the same class with equal configs (a preprocessor loaded again from its
        preset or `.keras` file, one per task built from the same preset) compute the same
        function, so they share one graph: tracing and instantiating a tokenizer and packer
        took 1.3 s for each new preprocessor.
        """
        if name not in self._compiled_functions:
            key = (type(self), name, tuple(input_signature), self._config_digest())
            if key not in _SHARED_GRAPHS:
                _SHARED_GRAPHS[key] = tf.function(
                    fn, input_signature=list(input_signature), autograph=False)
                while len(_SHARED_GRAPHS) > _SHARED_GRAPHS_KEPT:
                    _SHARED_GRAPHS.popitem(last=False)
            _SHARED_GRAPHS.move_to_end(key)
            self._compiled_functions[name] = _SHARED_GRAPHS[key]
        compiled = self._compiled_functions[name]

        def call(*args):
            if not _matches(input_signature, args):
                return fn(*args)
            if in_graph():
                return compiled(*args)
            with _graph_optimizations_off():
                return compiled(*args)

        return call

    def _config_digest(self):
        """A digest of everything that decides what the layer computes: its config (the
        vocabulary of a tokenizer included) without the names, here or in nested layers."""
        config = _without_names(keras.saving.serialize_keras_object(self.get_config()))
        text = json.dumps(config, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def _graph_optimizations_off():
    """Eager calls of a cached graph run without Grappler's rewrites: the graph is instantiated
    for one call on one batch (a list of strings becomes numpy rows once), and optimizing a
    tokenizer's graph (constant folding its vocabulary, mostly) took longer than running it:
    a new preprocessor's first call on 128 reviews 1.5 s -> 0.8 s. The graph instantiated
    inside tf.data or an exported SavedModel is optimized as usual."""
    previous = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": previous})


def _without_names(config):
    if isinstance(config, dict):
        return {key: _without_names(value) for key, value in config.items()
                if key not in ("name", "trainable", "dtype")}
    if isinstance(config, (list, tuple)):
        return [_without_names(value) for value in config]
    return config


def to_string_tensor(inputs, argument="inputs"):
    """str / bytes / sequences / numpy arrays / tf string tensors -> a tf.string tensor."""
    if isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
        if inputs.dtype != tf.string:
            raise ValueError(f"{argument} must be strings, got a {inputs.dtype.name} tensor. "
                             "Pass raw text; token ids go to SegmentPacker instead.")
        return inputs
    if isinstance(inputs, (str, bytes)):
        return tf.constant(inputs)
    if isinstance(inputs, (list, tuple, np.ndarray)):
        array = np.asarray(inputs, dtype=object)
        bad = next((x for x in array.reshape(-1) if not isinstance(x, (str, bytes))), None)
        if bad is not None:
            raise ValueError(f"{argument} must be str or bytes (or a list of them); found "
                             f"{bad!r} of type {type(bad).__name__}.")
        return tf.constant(array, dtype=tf.string) if array.size else tf.zeros(array.shape, tf.string)
    raise ValueError(f"{argument} must be str, bytes, a list of them, a numpy array or a tf.string "
                     f"tensor; got {type(inputs).__name__}.")


def _matches(signature, args):
    """True when `args` are dense tensors that `signature`'s specs accept."""
    return len(args) == len(signature) and all(
        isinstance(arg, tf.Tensor) and spec.is_compatible_with(arg)
        for spec, arg in zip(signature, args))


def in_graph():
    """True inside tf.function / tf.data / SavedModel tracing, False when running eagerly."""
    return not tf.executing_eagerly()


def to_numpy_if_eager(structure):
    """Eager results become numpy arrays, which every Keras backend's model accepts."""
    if in_graph():
        return structure
    return tf.nest.map_structure(lambda t: t.numpy() if isinstance(t, tf.Tensor) else t, structure)
