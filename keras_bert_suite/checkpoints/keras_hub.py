"""KerasHub BertBackbone presets (config.json naming keras_hub>BertBackbone, model.weights.h5,
tokenizer.json, assets/tokenizer/vocabulary.txt), and converters between KerasHub's weights
and ours. The other families' backbones (RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA) are
keras_hub_families.py's; `load` reads those presets too.

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

A BertMaskedLM preset (save_keras_hub of a BertPretrainer) also holds task.json and
task.weights.h5 with `mlm_head/...`: its MLM head, read as our `mlm/...` weights.

KerasHub's BertBackbone computes the tanh-approximate GELU while the checkpoints it ships were
trained (by Google) with the exact one that BertEncoder uses, so its weights load unchanged.
"""

import json
import os

import numpy as np

from keras_bert_suite.checkpoints import split_heads, weight_table
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.errors import UnsupportedCheckpointError
from keras_bert_suite.checkpoints.tensors import TensorSource

NAME = "KerasHub BERT-family preset"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TASK_CONFIG_FILE, TASK_WEIGHTS_FILE = "task.json", "task.weights.h5"  # a KerasHub task's head
# Every backbone `load` reads (keras_hub_families.BACKBONES, spelled out: no import cycle).
BACKBONE_CLASSES = ("BertBackbone", "RobertaBackbone", "XLMRobertaBackbone",
                    "DistilBertBackbone", "AlbertBackbone", "ElectraBackbone")
FILES_NEEDED = (f"{CONFIG_FILE} naming keras_hub>BertBackbone (or RobertaBackbone, "
                f"XLMRobertaBackbone, DistilBertBackbone, AlbertBackbone, ElectraBackbone) + "
                f"{WEIGHTS_FILE}")

# Table template -> KerasHub's variable path (under `transformer_layer_{i}/` for a layer's).
# `{part}`: KerasHub keeps query, key and value in three variables; ours stacks them.
KERAS_HUB_NAMES = {
    "embeddings/token_embedding": "token_embedding/embeddings",
    "embeddings/segment_embedding": "segment_embedding/embeddings",
    "embeddings/position_embedding": "position_embedding/embeddings",
    "embeddings/layer_norm/gamma": "embeddings_layer_norm/gamma",
    "embeddings/layer_norm/beta": "embeddings_layer_norm/beta",
    "attention/qkv/kernel": "self_attention_layer/{part}/kernel",  # 3 x [H, N, Dh], axis 1
    "attention/qkv/bias": "self_attention_layer/{part}/bias",  # 3 x [N, Dh], axis 0
    "attention/output/kernel": "self_attention_layer/attention_output/kernel",  # [N, Dh, H]
    "attention/output/bias": "self_attention_layer/attention_output/bias",
    "attention_layer_norm/gamma": "self_attention_layer_norm/gamma",
    "attention_layer_norm/beta": "self_attention_layer_norm/beta",
    "intermediate/kernel": "feedforward_intermediate_dense/kernel",
    "intermediate/bias": "feedforward_intermediate_dense/bias",
    "output/kernel": "feedforward_output_dense/kernel",
    "output/bias": "feedforward_output_dense/bias",
    "output_layer_norm/gamma": "feedforward_layer_norm/gamma",
    "output_layer_norm/beta": "feedforward_layer_norm/beta",
    "pooler/kernel": "pooled_dense/kernel",
    "pooler/bias": "pooled_dense/bias",
}
# BertTextClassifier's head: a Dense named "logits" (our BertClassifier's classifier_head).
CLASSIFIER_HEAD_NAMES = {"kernel": "logits/kernel", "bias": "logits/bias"}
# Our MLM head (a BertPretrainer's) -> BertMaskedLM's `mlm_head` variables (a task variable).
MASKED_LM_HEAD_NAMES = {
    "mlm/transform/kernel": "mlm_head/intermediate_dense/kernel",
    "mlm/transform/bias": "mlm_head/intermediate_dense/bias",
    "mlm/layer_norm/gamma": "mlm_head/intermediate_layer_norm/gamma",
    "mlm/layer_norm/beta": "mlm_head/intermediate_layer_norm/beta",
    "mlm/output_bias": "mlm_head/output_bias",
}

def matches(directory, config_json):
    return config_json is not None and (
        str(config_json.get("registered_name", "")).startswith("keras_hub>")
        or str(config_json.get("module", "")).startswith("keras_hub."))


def load(directory, load_weights=True):
    config_path = os.path.join(directory, CONFIG_FILE)
    with open(config_path) as f:
        saved = json.load(f)
    if saved.get("class_name") not in BACKBONE_CLASSES:
        raise UnsupportedCheckpointError(
            f"{config_path}: KerasHub class '{saved.get('class_name')}' is not supported; only "
            f"{', '.join(BACKBONE_CLASSES)} presets can be loaded into BertEncoder.")
    if saved["class_name"] != "BertBackbone":
        from keras_bert_suite.checkpoints import keras_hub_families

        return keras_hub_families.load(directory, saved, load_weights)
    config = encoder_config(saved["config"])
    weights = None
    if load_weights:
        source = weights_source(os.path.join(directory, WEIGHTS_FILE), config_path)
        weights = from_keras_hub(source, config)
        weights.update(_masked_lm_head(directory, config))
    task_head = _classifier_head(directory, config) if load_weights else None
    vocabulary_path = os.path.join(directory, "assets", "tokenizer", "vocabulary.txt")
    return Checkpoint(
        config=config,
        weights=weights,
        vocabulary_path=vocabulary_path if os.path.exists(vocabulary_path) else None,
        lowercase=_lowercase(directory),
        format="keras_hub",
        task_head=task_head,
    )


def _masked_lm_head(directory, config):
    """Our `mlm/...` weights from a BertMaskedLM preset's task.weights.h5 (what save_keras_hub
    writes for a BertPretrainer), so BertPretrainer.from_preset reads its head back; {} for
    any other preset."""
    source = task_weights(directory, "BertMaskedLM")
    if source is None:
        return {}
    return {weight.name: source.get(MASKED_LM_HEAD_NAMES[weight.name], weight.shape)
            for weight in weight_table.head_weights("mlm", config)}


def _classifier_head(directory, config):
    """A BertTextClassifier preset's `logits` Dense as a Checkpoint.task_head, else None."""
    source = task_weights(directory, "BertTextClassifier")
    return None if source is None else classifier_head(source, config)


def classifier_head(source, config):
    """A KerasHub TextClassifier's `logits` Dense (task.weights.h5) as our BertClassifier's."""
    units = int(source.get_unchecked(CLASSIFIER_HEAD_NAMES["bias"]).shape[0])
    return {"task": "BertClassifier", "label_names": None,
            "kernel": source.get(CLASSIFIER_HEAD_NAMES["kernel"], (config["hidden_dim"], units)),
            "bias": source.get(CLASSIFIER_HEAD_NAMES["bias"], (units,))}


def task_weights(directory, class_name):
    """A TensorSource over task.weights.h5 when task.json names `class_name`, else None."""
    task_path = os.path.join(directory, TASK_CONFIG_FILE)
    weights_path = os.path.join(directory, TASK_WEIGHTS_FILE)
    if not (os.path.exists(task_path) and os.path.exists(weights_path)):
        return None
    with open(task_path) as f:
        if json.load(f).get("class_name") != class_name:
            return None
    return weights_source(weights_path, task_path)


def weights_source(weights_path, config_path):
    """A TensorSource over a KerasHub .weights.h5 file, by Keras variable path."""
    return TensorSource(*_dict_source(read_weights_h5(weights_path)), where=weights_path,
                        config_file=config_path)


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
    weights, sizes = {}, weight_table.dimensions(config)
    for weight in weight_table.encoder_weights(config):
        weights[weight.name] = split_heads.read(source, weight, _keras_hub_name(weight), sizes)
    return weights


def to_keras_hub(weights, config):
    """{our canonical name: array} -> {KerasHub variable path: array} (encoder weights only)."""
    variables, sizes = {}, weight_table.dimensions(config)
    for weight in weight_table.encoder_weights(config):
        variables.update(split_heads.write(weight, weights[weight.name], _keras_hub_name(weight),
                                           sizes))
    return variables


def _keras_hub_name(weight):
    name = KERAS_HUB_NAMES[weight.template]
    return name if weight.layer is None else f"transformer_layer_{weight.layer}/{name}"


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
    "masked_lm_head": "mlm_head",  # task.weights.h5 of a BertMaskedLM
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
    if layer == "mlm_head":  # MaskedLMHead's own variable (its Dense and LayerNorm nest)
        return ("output_bias",)
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
