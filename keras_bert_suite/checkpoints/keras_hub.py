"""KerasHub BertBackbone presets (config.json naming keras_hub>BertBackbone, model.weights.h5,
tokenizer.json, assets/tokenizer/vocabulary.txt), and converters between KerasHub's weights
and ours.

KerasHub names a weight by its Keras variable path (`BertBackbone.weights[i].path`):

    token_embedding/embeddings, segment_embedding/embeddings, position_embedding/embeddings
    embeddings_layer_norm/{gamma,beta}
    transformer_layer_{i}/self_attention_layer/{query,key,value}/kernel  [H, N, H/N]
    transformer_layer_{i}/self_attention_layer/{query,key,value}/bias    [N, H/N]
    transformer_layer_{i}/self_attention_layer/attention_output/kernel   [N, H/N, H]
    transformer_layer_{i}/self_attention_layer/attention_output/bias     [H]
    transformer_layer_{i}/{self_attention_layer_norm,feedforward_layer_norm}/{gamma,beta}
    transformer_layer_{i}/{feedforward_intermediate_dense,feedforward_output_dense}/{kernel,bias}
    pooled_dense/{kernel,bias}

KerasHub's BertBackbone computes the tanh-approximate GELU while the checkpoints it ships were
trained (by Google) with the exact one that BertEncoder uses, so its weights load unchanged.
"""

import json
import os

import numpy as np

from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.errors import UnsupportedCheckpointError
from keras_bert_suite.checkpoints.tensors import TensorSource

NAME = "KerasHub BertBackbone preset"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
FILES_NEEDED = f"{CONFIG_FILE} naming keras_hub>BertBackbone + {WEIGHTS_FILE}"

# Our per-layer names -> KerasHub's, for the weights that only differ in name.
_LAYER_RENAMES = {
    "attention_layer_norm": "self_attention_layer_norm",
    "intermediate": "feedforward_intermediate_dense",
    "output": "feedforward_output_dense",
    "output_layer_norm": "feedforward_layer_norm",
}
# KerasHub keeps query, key and value in three [H, N, Dh] kernels; ours stacks them on axis 1.
_QKV = ("query", "key", "value")
_TOP_RENAMES = {
    "embeddings/token_embedding": "token_embedding/embeddings",
    "embeddings/segment_embedding": "segment_embedding/embeddings",
    "embeddings/position_embedding": "position_embedding/embeddings",
    "embeddings/layer_norm/gamma": "embeddings_layer_norm/gamma",
    "embeddings/layer_norm/beta": "embeddings_layer_norm/beta",
    "pooler/kernel": "pooled_dense/kernel",
    "pooler/bias": "pooled_dense/bias",
}


def matches(directory, config_json):
    return config_json is not None and (
        str(config_json.get("registered_name", "")).startswith("keras_hub>")
        or str(config_json.get("module", "")).startswith("keras_hub."))


def load(directory, load_weights=True):
    config_path = os.path.join(directory, CONFIG_FILE)
    with open(config_path) as f:
        saved = json.load(f)
    if saved.get("class_name") != "BertBackbone":
        raise UnsupportedCheckpointError(
            f"{config_path}: KerasHub class '{saved.get('class_name')}' is not supported; only "
            f"BertBackbone presets can be loaded into BertEncoder.")
    config = encoder_config(saved["config"])
    weights = None
    if load_weights:
        weights_path = os.path.join(directory, WEIGHTS_FILE)
        source = TensorSource(
            *_dict_source(read_weights_h5(weights_path)), where=weights_path,
            config_file=config_path)
        weights = from_keras_hub(source, config)
    vocabulary_path = os.path.join(directory, "assets", "tokenizer", "vocabulary.txt")
    return Checkpoint(
        config=config,
        weights=weights,
        vocabulary_path=vocabulary_path if os.path.exists(vocabulary_path) else None,
        lowercase=_lowercase(directory),
        format="keras_hub",
    )


def encoder_config(backbone_config):
    """BertBackbone's arguments already use our names; it hard-wires epsilon and init range."""
    keys = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim")
    config = {key: backbone_config[key] for key in keys}
    config.update(
        max_sequence_length=backbone_config.get("max_sequence_length", 512),
        num_segments=backbone_config.get("num_segments", 2),
        dropout=backbone_config.get("dropout", 0.1),
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
    )
    return config


def from_keras_hub(variables, config):
    """{KerasHub variable path: array} (or a TensorSource) -> {our canonical name: array}."""
    source = variables if isinstance(variables, TensorSource) else TensorSource(
        *_dict_source(variables), where="KerasHub weights", config_file="the config")
    shapes = _our_shapes(config)
    hidden, heads = config["hidden_dim"], config["num_heads"]
    head_dim = hidden // heads
    weights = {}
    for ours, shape in shapes.items():
        if ours in _TOP_RENAMES:
            weights[ours] = source.get(_TOP_RENAMES[ours], shape)
            continue
        layer, rest = ours.split("/", 1)
        theirs = f"transformer_layer_{layer[len('layer_'):]}"
        attention = f"{theirs}/self_attention_layer"
        if rest == "attention/qkv/kernel":  # 3 x [H, N, Dh] -> [H, 3, N, Dh]
            weights[ours] = np.stack([source.get(f"{attention}/{p}/kernel", shape[:1] + shape[2:])
                                      for p in _QKV], axis=1)
        elif rest == "attention/qkv/bias":  # 3 x [N, Dh] -> [3, N, Dh]
            weights[ours] = np.stack([source.get(f"{attention}/{p}/bias", shape[1:])
                                      for p in _QKV])
        elif rest == "attention/output/kernel":
            kernel = source.get(f"{attention}/attention_output/kernel", (heads, head_dim, hidden))
            weights[ours] = kernel.reshape(hidden, hidden)
        elif rest == "attention/output/bias":
            weights[ours] = source.get(f"{attention}/attention_output/bias", (hidden,))
        else:
            module, variable = rest.rsplit("/", 1)
            weights[ours] = source.get(f"{theirs}/{_LAYER_RENAMES[module]}/{variable}", shape)
    return weights


def to_keras_hub(weights, config):
    """{our canonical name: array} -> {KerasHub variable path: array} (encoder weights only)."""
    hidden, heads = config["hidden_dim"], config["num_heads"]
    head_dim = hidden // heads
    variables = {}
    for ours in _our_shapes(config):
        value = np.asarray(weights[ours])
        if ours in _TOP_RENAMES:
            variables[_TOP_RENAMES[ours]] = value
            continue
        layer, rest = ours.split("/", 1)
        theirs = f"transformer_layer_{layer[len('layer_'):]}"
        attention = f"{theirs}/self_attention_layer"
        if rest == "attention/qkv/kernel":  # [H, 3, N, Dh] -> 3 x [H, N, Dh]
            for index, part in enumerate(_QKV):
                variables[f"{attention}/{part}/kernel"] = value[:, index]
        elif rest == "attention/qkv/bias":  # [3, N, Dh] -> 3 x [N, Dh]
            for index, part in enumerate(_QKV):
                variables[f"{attention}/{part}/bias"] = value[index]
        elif rest == "attention/output/kernel":
            variables[f"{attention}/attention_output/kernel"] = value.reshape(
                heads, head_dim, hidden)
        elif rest == "attention/output/bias":
            variables[f"{attention}/attention_output/bias"] = value
        else:
            module, variable = rest.rsplit("/", 1)
            variables[f"{theirs}/{_LAYER_RENAMES[module]}/{variable}"] = value
    return variables


def _our_shapes(config):
    """Canonical encoder weight names (models/weight_names.py order) and shapes, from a config."""
    vocabulary, hidden = config["vocabulary_size"], config["hidden_dim"]
    intermediate, heads = config["intermediate_dim"], config["num_heads"]
    shapes = {
        "embeddings/token_embedding": (vocabulary, hidden),
        "embeddings/segment_embedding": (config["num_segments"], hidden),
        "embeddings/position_embedding": (config["max_sequence_length"], hidden),
        "embeddings/layer_norm/gamma": (hidden,),
        "embeddings/layer_norm/beta": (hidden,),
    }
    for i in range(config["num_layers"]):
        p = f"layer_{i}"
        shapes.update({
            f"{p}/attention/qkv/kernel": (hidden, 3, heads, hidden // heads),
            f"{p}/attention/qkv/bias": (3, heads, hidden // heads),
            f"{p}/attention/output/kernel": (hidden, hidden),
            f"{p}/attention/output/bias": (hidden,),
            f"{p}/attention_layer_norm/gamma": (hidden,),
            f"{p}/attention_layer_norm/beta": (hidden,),
            f"{p}/intermediate/kernel": (hidden, intermediate),
            f"{p}/intermediate/bias": (intermediate,),
            f"{p}/output/kernel": (intermediate, hidden),
            f"{p}/output/bias": (hidden,),
            f"{p}/output_layer_norm/gamma": (hidden,),
            f"{p}/output_layer_norm/beta": (hidden,),
        })
    shapes.update({"pooler/kernel": (hidden, hidden), "pooler/bias": (hidden,)})
    return shapes


def _dict_source(variables):
    return list(variables), variables.__getitem__


# === Reading model.weights.h5 without building a Keras model ===

# Keras writes each layer's variables to `<parent>/<attribute or class key>/vars/<index>` and,
# since Keras 3.x, the layer's name as the `name` attribute of `vars`. For files without it,
# these are the keys KerasHub's BertBackbone gets (class name, numbered in layer order).
_FALLBACK_LAYER_NAMES = {
    "reversible_embedding": "token_embedding",
    "embedding": "segment_embedding",
    "position_embedding": "position_embedding",
    "layer_normalization": "embeddings_layer_norm",
    "dense": "pooled_dense",
    "query_dense": "query",
    "key_dense": "key",
    "value_dense": "value",
    "output_dense": "attention_output",
}


def read_weights_h5(path):
    """model.weights.h5 -> {Keras variable path: float array}, e.g. 'pooled_dense/kernel'."""
    import h5py

    variables = {}
    with h5py.File(path, "r") as h5:
        for key, group in h5["layers"].items():
            _collect(group, _layer_name(key, group), variables)
    return variables


def _collect(group, path, variables):
    if "vars" in group:
        values = [group["vars"][index] for index in sorted(group["vars"], key=int)]
        for variable, dataset in zip(_variable_names(path), values):
            variables[f"{path}/{variable}"] = _to_array(dataset)
    for key, child in group.items():
        if key != "vars" and hasattr(child, "items"):
            _collect(child, f"{path}/{_layer_name(key, child)}", variables)


def _layer_name(key, group):
    name = group["vars"].attrs.get("name") if "vars" in group else None
    if name:
        return name.decode() if isinstance(name, bytes) else str(name)
    if key.startswith("transformer_encoder"):
        return f"transformer_layer_{key.rpartition('_')[2] if key[-1].isdigit() else 0}"
    return _FALLBACK_LAYER_NAMES.get(key, key.lstrip("_"))


def _variable_names(layer_path):
    """The order Keras creates variables in: Dense/EinsumDense, LayerNorm, Embedding."""
    layer = layer_path.rsplit("/", 1)[-1]
    if layer.endswith("layer_norm"):
        return ("gamma", "beta")
    if layer.endswith("embedding"):
        return ("embeddings",)
    return ("kernel", "bias")


def _to_array(dataset):
    value = dataset[()]
    if dataset.attrs.get("dtype") == "bfloat16":  # Keras stores bf16 as raw 16-bit values
        import ml_dtypes

        value = np.asarray(value).view(ml_dtypes.bfloat16).astype(np.float32)
    return np.asarray(value)


def _lowercase(directory):
    tokenizer_path = os.path.join(directory, "tokenizer.json")
    if os.path.exists(tokenizer_path):
        with open(tokenizer_path) as f:
            return bool(json.load(f).get("config", {}).get("lowercase", True))
    return True
