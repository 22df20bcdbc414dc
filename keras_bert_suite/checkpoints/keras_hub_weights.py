"""Our canonical weights <-> a KerasHub backbone's variables (and its tasks' heads), for any
row of keras_hub_backbones.BACKBONES: the names are the row's (keras_hub_names.py), the
positions of RoBERTa's backbones are read and written as that module's docstring says."""

import numpy as np

from keras_bert_suite.checkpoints import split_heads, weight_table
from keras_bert_suite.checkpoints.keras_hub_names import (
    CLASSIFIER_HEAD_NAMES, MASKED_LM_HEAD_NAMES, POOLED_DENSE_NAMES)
from keras_bert_suite.checkpoints.tensors import TensorSource

_POSITION_AND_SEGMENT = ("embeddings/position_embedding", "embeddings/segment_embedding")


def from_keras_hub(backbone, variables, config, task_source=None):
    """{our canonical name: array} from {KerasHub variable path: array} (or a TensorSource
    over model.weights.h5) and, for the pooler of a backbone without one, a TensorSource
    over its TextClassifier's task.weights.h5 (without it that pooler is left out)."""
    source = variables if isinstance(variables, TensorSource) else TensorSource(
        list(variables), variables.__getitem__, where="KerasHub weights",
        config_file="the config")
    weights, sizes = {}, weight_table.dimensions(config)
    for weight in weight_table.encoder_weights(config):
        if _in_task(backbone, weight):
            if task_source is not None:
                weights[weight.name] = task_source.get(POOLED_DENSE_NAMES[weight.name],
                                                       weight.shape)
        elif backbone.positions_from_zero and weight.name in _POSITION_AND_SEGMENT:
            weights[weight.name] = _position_or_segment(backbone, source, weight, config)
        else:
            weights[weight.name] = split_heads.read(
                source, weight, backbone.variable_name(weight, config), sizes,
                backbone.their_shapes)
    return weights


def to_keras_hub(backbone, weights, config):
    """{KerasHub variable path: array} of the backbone for our canonical `weights` (a pooler
    the backbone has not goes to its classifier: `task_pooler`)."""
    variables, sizes = {}, weight_table.dimensions(config)
    for weight in weight_table.encoder_weights(config):
        value = weights[weight.name]
        if _in_task(backbone, weight):
            continue
        if backbone.positions_from_zero and weight.name in _POSITION_AND_SEGMENT:
            if weight.name == "embeddings/position_embedding":
                variables[backbone.names[weight.name]] = _positions_from_zero(weights, config)
            continue  # the segment row is added to the position table
        variables.update(split_heads.write(weight, value, backbone.variable_name(weight, config),
                                           sizes, backbone.their_shapes))
    return variables


def task_pooler(backbone, weights):
    """{the TextClassifier's pooled_dense path: array}: our pooler where the backbone has
    none (RoBERTa's, DistilBERT's), else {}."""
    if backbone.has_pooler():
        return {}
    return {theirs: weights[ours] for ours, theirs in POOLED_DENSE_NAMES.items()}


def classifier_head(source, config):
    """A KerasHub TextClassifier's `logits` Dense (task.weights.h5) as `Checkpoint.task_head`
    gives it to the task whose checkpoint form names KerasHub's classifier (its pooled_dense
    is read as the encoder's pooler, where the backbone has none)."""
    units = int(source.get_unchecked(CLASSIFIER_HEAD_NAMES["bias"]).shape[0])
    return {"label_names": None, "pooler": {},
            "kernel": source.get(CLASSIFIER_HEAD_NAMES["kernel"], (config["hidden_dim"], units)),
            "bias": source.get(CLASSIFIER_HEAD_NAMES["bias"], (units,))}


def masked_lm_head(source, config):
    """Our `mlm/...` weights from a BertMaskedLM's task.weights.h5."""
    return {weight.name: source.get(MASKED_LM_HEAD_NAMES[weight.name], weight.shape)
            for weight in weight_table.head_weights("mlm", config)}


def _in_task(backbone, weight):
    """Our pooler where the backbone has none: the TextClassifier's pooled_dense."""
    return weight.name.startswith("pooler/") and weight.name not in backbone.names


def _position_or_segment(backbone, source, weight, config):
    """RoBERTa: zero rows below the offset, then KerasHub's table; a zero segment row."""
    if weight.name == "embeddings/segment_embedding":
        return np.zeros(weight.shape, np.float32)
    offset, width = config["position_offset"], weight.shape[1]
    theirs = source.get(backbone.names[weight.name], (config["max_sequence_length"], width))
    return np.concatenate([np.zeros((offset, width), theirs.dtype), theirs])


def _positions_from_zero(weights, config):
    """RoBERTa: our table from row `position_offset` on, plus segment row 0 (every token
    reads it, and KerasHub's backbone has no segment embedding)."""
    table = np.asarray(weights["embeddings/position_embedding"],
                       np.float32)[config["position_offset"]:]
    if config["num_segments"]:
        table = table + np.asarray(weights["embeddings/segment_embedding"], np.float32)[0]
    return table
