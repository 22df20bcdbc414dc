"""KerasHub presets of BERT's family beyond BertBackbone (that one is keras_hub.py):
RobertaBackbone, XLMRobertaBackbone, DistilBertBackbone, AlbertBackbone, ElectraBackbone and
the *TextClassifier tasks KerasHub has for them, read into each family's BertEncoder
configuration (families/*.py) and written back by keras_hub_writer.py.

KerasHub names a weight by its Keras variable path (`backbone.weights[i].path`). Every block
uses BertBackbone's names (keras_hub.KERAS_HUB_NAMES) under `transformer_layer_{i}/`, ALBERT's
under `group_{g}_inner_layer_{j}/` (our block g * layers_per_group + j); the embeddings and
the pooler are each backbone's (EMBEDDING_NAMES below). RoBERTa's and DistilBERT's backbones
have no pooler: their TextClassifier's `pooled_dense` (task.weights.h5) is our pooler, as
transformers' `classifier.dense` / `pre_classifier` are.

What KerasHub computes, against our configuration of each family:
* RoBERTa / XLM-R: positions 0..T-1 whatever the padding, from a table of max_sequence_length
  rows, and no segment embedding. transformers (and our RoBERTa) number real tokens from row 2
  of max_sequence_length + 2 rows and add one segment row (zero in the released checkpoints).
  KerasHub's table is ours from row `position_offset` on, plus the segment row (as KerasHub's
  own transformers converter folds it). Reading gives the segment row and the rows below the
  offset as zeros (row 1, the padding row, is read only at padding positions); writing drops
  those rows and adds the segment row in (exact when it is zero). On right-padded input (what
  KerasHub's preprocessors make) the outputs at real tokens are the same; at padding
  positions, which nothing reads, they differ. LayerNorm epsilon 1e-5 and the exact GELU, as
  ours.
* DistilBERT: the same math as ours (exact GELU, epsilon 1e-12, no segments).
* ALBERT: the same math (the tanh GELU on both sides); num_groups = num_layer_groups (KerasHub
  needs num_layers to be a multiple of it), num_inner_repetitions = layers_per_group.
* ELECTRA: KerasHub's blocks compute the tanh-approximate GELU and its `pooled_dense` tanh.
  ELECTRA was trained with the exact GELU (transformers' ElectraModel) and has no pooler: our
  ELECTRA's pooler is its classification head's dense + GELU. The preset is read as our
  ELECTRA (exact GELU, GELU pooler), like BertBackbone's tanh GELU in keras_hub.py: the
  sequence output differs from KerasHub's by the GELU alone (7.7e-5 of its largest value,
  5.2e-4 relative, on the tiny random model of tests/checkpoints/test_keras_hub_families.py;
  BERT's tanh GELU moves real MiniLM by 4.2e-3), the pooled output by the pooler's activation.
"""

import logging
import os
from typing import Callable, NamedTuple

import numpy as np

from keras_bert_suite.checkpoints import keras_hub, split_heads, weight_table
from keras_bert_suite.checkpoints.bert_config import BERT_FAMILY_DEFAULTS, ENCODER_CONFIG_KEYS
from keras_bert_suite.checkpoints.checkpoint import Checkpoint

logger = logging.getLogger(__name__)

POOLED_DENSE_NAMES = {"pooler/kernel": "pooled_dense/kernel", "pooler/bias": "pooled_dense/bias"}
_LAYER_NORM = {"embeddings/layer_norm/gamma": "embeddings_layer_norm/gamma",
               "embeddings/layer_norm/beta": "embeddings_layer_norm/beta"}
_SEPARATE = {  # ALBERT's and ELECTRA's: token, segment and position embeddings at the top
    "embeddings/token_embedding": "token_embedding/embeddings",
    "embeddings/segment_embedding": "segment_embedding/embeddings",
    "embeddings/position_embedding": "position_embedding/embeddings",
    **_LAYER_NORM, **POOLED_DENSE_NAMES}
# Backbone class -> {embedding / pooler template: KerasHub variable path}; the weights of ours
# that are not here and not in a block are not in that backbone (see the module docstring).
EMBEDDING_NAMES = {
    "RobertaBackbone": {"embeddings/token_embedding": "embeddings/token_embedding/embeddings",
                        "embeddings/position_embedding":
                            "embeddings/position_embedding/embeddings", **_LAYER_NORM},
    "DistilBertBackbone": {
        "embeddings/token_embedding": "token_and_position_embedding/token_embedding/embeddings",
        "embeddings/position_embedding":
            "token_and_position_embedding/position_embedding/embeddings", **_LAYER_NORM},
    "AlbertBackbone": {**_SEPARATE, "embeddings/projection/kernel": "embedding_projection/kernel",
                       "embeddings/projection/bias": "embedding_projection/bias"},
    "ElectraBackbone": {**_SEPARATE,  # only when embedding_dim != hidden_dim
                        "embeddings/projection/kernel": "embeddings_projection/kernel",
                        "embeddings/projection/bias": "embeddings_projection/bias"},
}
EMBEDDING_NAMES["XLMRobertaBackbone"] = EMBEDDING_NAMES["RobertaBackbone"]


class HubBackbone(NamedTuple):
    """class_name: KerasHub's backbone ("RobertaBackbone").
    encoder_config: its config.json "config" -> BertEncoder arguments.
    arguments: BertEncoder arguments -> its constructor's (ValueError for what it cannot hold).
    block: (our block index, BertEncoder arguments) -> its layer's name.
    classifier: its TextClassifier, or None.
    wordpiece: whether its tokenizer is WordPiece (then we write it from our vocabulary).
    also_held: {argument: values other than the read-back one that it computes the same, or
        close (ELECTRA's GELUs)}; None: any value.
    """

    class_name: str
    encoder_config: Callable
    arguments: Callable
    block: Callable
    classifier: str = None
    wordpiece: bool = False
    also_held: dict = {}

    @property
    def names(self):
        return EMBEDDING_NAMES[self.class_name]

    @property
    def counts_positions_from_zero(self):
        """RoBERTa's: a table without transformers' rows below the offset, no segment row."""
        return self.class_name in ("RobertaBackbone", "XLMRobertaBackbone")


def _ours(hub, num_segments, layer_norm_epsilon, **family):
    """BertEncoder arguments from a KerasHub backbone config (ELECTRA says `vocab_size`)."""
    return {"vocabulary_size": hub.get("vocabulary_size", hub.get("vocab_size")),
            **{key: hub[key] for key in ("num_layers", "num_heads", "hidden_dim",
                                         "intermediate_dim")},
            "max_sequence_length": hub.get("max_sequence_length", 512),
            "num_segments": num_segments, "dropout": hub.get("dropout", 0.1),
            "layer_norm_epsilon": layer_norm_epsilon,
            "initializer_range": 0.02,  # every one hard-wires a truncated normal of 0.02
            **BERT_FAMILY_DEFAULTS, **family}


def _theirs(config, **extra):
    return {**{key: config[key] for key in ("vocabulary_size", "num_layers", "num_heads",
                                            "hidden_dim", "intermediate_dim", "dropout",
                                            "max_sequence_length")}, **extra}


def _with_segments(config, class_name):
    if config["num_segments"] < 1:
        raise ValueError(f"KerasHub's {class_name} always adds a segment embedding, and this "
                         f"encoder has none (num_segments=0).")
    return config["num_segments"]


def _albert_arguments(config):
    groups = config["num_layer_groups"] or config["num_layers"]
    if config["embedding_dim"] is None or config["num_layers"] % groups:
        raise ValueError(
            f"KerasHub's AlbertBackbone projects embeddings of their own width (embedding_dim, "
            f"here {config['embedding_dim']}) and runs each of num_layer_groups groups "
            f"num_layers / num_layer_groups times (here {config['num_layers']} / {groups}).")
    return _theirs(config, embedding_dim=config["embedding_dim"], num_groups=groups,
                   num_inner_repetitions=config["layers_per_group"],
                   num_segments=_with_segments(config, "AlbertBackbone"))


def _electra_arguments(config):
    arguments = _theirs(config, embedding_dim=config["embedding_dim"] or config["hidden_dim"],
                        num_segments=_with_segments(config, "ElectraBackbone"))
    arguments["vocab_size"] = arguments.pop("vocabulary_size")
    return arguments


def _layer(index, config):
    return f"transformer_layer_{index}"


def _albert_layer(index, config):
    group, inner = divmod(index, config["layers_per_group"])
    return f"group_{group}_inner_layer_{inner}"


_ROBERTA = dict(encoder_config=lambda hub: _ours(hub, 1, 1e-5, position_offset=2),
                arguments=_theirs, block=_layer,
                also_held={"num_segments": (0,), "position_offset": None})
BACKBONES = {backbone.class_name: backbone for backbone in (
    HubBackbone("RobertaBackbone", classifier="RobertaTextClassifier", **_ROBERTA),
    HubBackbone("XLMRobertaBackbone", classifier="XLMRobertaTextClassifier", **_ROBERTA),
    HubBackbone("DistilBertBackbone", classifier="DistilBertTextClassifier", wordpiece=True,
                encoder_config=lambda hub: _ours(hub, 0, 1e-12, pooler_activation="relu"),
                arguments=_theirs, block=_layer),
    HubBackbone("AlbertBackbone", classifier="AlbertTextClassifier", block=_albert_layer,
                encoder_config=lambda hub: _ours(
                    hub, hub.get("num_segments", 2), 1e-12, embedding_dim=hub["embedding_dim"],
                    activation="gelu_approximate", num_layer_groups=hub.get("num_groups", 1),
                    layers_per_group=hub.get("num_inner_repetitions", 1)),
                arguments=_albert_arguments),
    HubBackbone("ElectraBackbone", wordpiece=True, block=_layer,
                encoder_config=lambda hub: _ours(
                    hub, hub.get("num_segments", 2), 1e-12, pooler_activation="gelu",
                    embedding_dim=None if hub["embedding_dim"] == hub["hidden_dim"]
                    else hub["embedding_dim"]),
                arguments=_electra_arguments,
                # what KerasHub computes itself (read back as ELECTRA's exact GELU + GELU)
                also_held={"activation": ("gelu_approximate",), "pooler_activation": ("tanh",)}),
)}


def backbone_for(config, sentencepiece=False):
    """The KerasHub backbone that holds encoder `config` (not BERT's: BertBackbone is
    keras_hub_writer's), else ValueError saying what it cannot hold. `sentencepiece`: the
    model's tokenizer is XLM-R's, so RoBERTa's architecture goes to XLMRobertaBackbone."""
    if config["num_layer_groups"] is not None:
        backbone = BACKBONES["AlbertBackbone"]
    elif config["embedding_dim"] is not None:
        backbone = BACKBONES["ElectraBackbone"]
    elif config["num_segments"] == 0 and config["position_offset"] == 0:
        backbone = BACKBONES["DistilBertBackbone"]
    else:
        backbone = BACKBONES["XLMRobertaBackbone" if sentencepiece else "RobertaBackbone"]
    read_back = backbone.encoder_config(backbone.arguments(config))
    differs = [f"{key}={config[key]!r} (it holds {read_back[key]!r})"
               for key in ENCODER_CONFIG_KEYS if key != "initializer_range"
               and not _same(key, config[key], read_back[key])
               and not _also_held(backbone, key, config[key])]
    if differs:
        raise ValueError(f"KerasHub's {backbone.class_name} cannot hold this encoder's "
                         f"{', '.join(differs)}.")
    return backbone


def _same(key, ours, theirs):
    if key == "layer_norm_epsilon":
        return bool(np.isclose(ours, theirs, rtol=1e-6, atol=0))
    return ours == theirs


def _also_held(backbone, key, value):
    if key not in backbone.also_held:
        return False
    values = backbone.also_held[key]
    return values is None or value in values


# === Weights ===

def _name(backbone, weight, config):
    if weight.layer is None:
        return backbone.names[weight.template]
    return f"{backbone.block(weight.layer, config)}/{keras_hub.KERAS_HUB_NAMES[weight.template]}"


def _in_task(backbone, weight):
    """Our pooler where the backbone has none: the TextClassifier's pooled_dense."""
    return weight.name.startswith("pooler/") and weight.name not in backbone.names


def from_keras_hub(backbone, source, config, task_source=None):
    """{our canonical name: array} from TensorSources over model.weights.h5 and (for the
    pooler of RoBERTa's and DistilBERT's classifiers) task.weights.h5."""
    weights, sizes = {}, weight_table.dimensions(config)
    for weight in weight_table.encoder_weights(config):
        if _in_task(backbone, weight):
            if task_source is not None:
                weights[weight.name] = task_source.get(POOLED_DENSE_NAMES[weight.name],
                                                       weight.shape)
        elif backbone.counts_positions_from_zero and weight.name in (
                "embeddings/position_embedding", "embeddings/segment_embedding"):
            weights[weight.name] = _position_or_segment(backbone, source, weight, config)
        else:
            weights[weight.name] = split_heads.read(source, weight,
                                                    _name(backbone, weight, config), sizes)
    return weights


def _position_or_segment(backbone, source, weight, config):
    """RoBERTa: zero rows below the offset, then KerasHub's table; a zero segment row."""
    if weight.name == "embeddings/segment_embedding":
        return np.zeros(weight.shape, np.float32)
    offset, width = config["position_offset"], weight.shape[1]
    theirs = source.get(backbone.names[weight.name], (config["max_sequence_length"], width))
    return np.concatenate([np.zeros((offset, width), theirs.dtype), theirs])


def to_keras_hub(backbone, weights, config):
    """({backbone variable path: array}, {the classifier's pooled_dense path: array}, empty
    where the backbone holds the pooler) for our canonical `weights`."""
    variables, pooled, sizes = {}, {}, weight_table.dimensions(config)
    for weight in weight_table.encoder_weights(config):
        value = weights[weight.name]
        if _in_task(backbone, weight):
            pooled[POOLED_DENSE_NAMES[weight.name]] = value
        elif weight.name == "embeddings/segment_embedding" and \
                backbone.counts_positions_from_zero:
            continue  # added to the position table below
        elif weight.name == "embeddings/position_embedding" and \
                backbone.counts_positions_from_zero:
            table = np.asarray(value, np.float32)[config["position_offset"]:]
            if config["num_segments"]:  # every token reads segment row 0
                table = table + np.asarray(weights["embeddings/segment_embedding"],
                                           np.float32)[0]
            variables[backbone.names[weight.name]] = table
        else:
            variables.update(split_heads.write(weight, value, _name(backbone, weight, config),
                                               sizes))
    return variables, pooled


# === Reading a preset directory ===

def load(directory, saved, load_weights=True):
    """A Checkpoint from a KerasHub preset whose config.json (`saved`) names one of
    BACKBONES; a TextClassifier preset also gives its head (and the pooler it holds)."""
    backbone = BACKBONES[saved["class_name"]]
    config_path = os.path.join(directory, keras_hub.CONFIG_FILE)
    config = backbone.encoder_config(saved["config"])
    weights = task_head = None
    if load_weights:
        source = keras_hub.weights_source(os.path.join(directory, keras_hub.WEIGHTS_FILE),
                                          config_path)
        task_source = None if backbone.classifier is None else keras_hub.task_weights(
            directory, backbone.classifier)
        weights = from_keras_hub(backbone, source, config, task_source)
        if task_source is not None:
            task_head = keras_hub.classifier_head(task_source, config)
    # WordPiece tokenizers (DistilBERT's, ELECTRA's) keep BERT's vocabulary file.
    vocabulary_path = os.path.join(directory, "assets", "tokenizer", "vocabulary.txt")
    has_vocabulary = os.path.exists(vocabulary_path)
    return Checkpoint(config=config, weights=weights,
                      vocabulary_path=vocabulary_path if has_vocabulary else None,
                      lowercase=keras_hub._lowercase(directory) if has_vocabulary else False,
                      format="keras_hub", task_head=task_head)

