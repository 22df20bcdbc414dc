"""The KerasHub backbones we read and write, one row each (BERT's is one row like the others):
its class, our family, how its config maps to our encoder's and back, its variable names, its
tokenizer and its tasks. keras_hub.py reads presets and keras_hub_writer.py writes them by
this table alone.

What KerasHub computes, against our configuration of each family:
* BERT: KerasHub's BertBackbone computes the tanh-approximate GELU while the checkpoints it
  ships were trained (by Google) with the exact one that BertEncoder uses, so its weights load
  unchanged and are read as exact-GELU BERT (its outputs differ from ours by ~1e-3 relative).
  It hard-wires LayerNorm epsilon 1e-12.
* RoBERTa / XLM-R: positions 0..T-1 whatever the padding, from a table of max_sequence_length
  rows, and no segment embedding. transformers (and our RoBERTa) number real tokens from row 2
  of max_sequence_length + 2 rows and add one segment row (zero in the released checkpoints).
  KerasHub's table is ours from row `position_offset` on, plus the segment row (as KerasHub's
  own transformers converter folds it). Reading gives the segment row and the rows below the
  offset as zeros (row 1, the padding row, is read only at padding positions); writing drops
  those rows and adds the segment row in (exact when it is zero). On right-padded input (what
  KerasHub's preprocessors make) the outputs at real tokens are the same; at padding
  positions, which nothing reads, they differ. LayerNorm epsilon 1e-5 and the exact GELU, as
  ours. Their backbones have no pooler: their TextClassifier's `pooled_dense` is ours.
* DistilBERT: the same math as ours (exact GELU, epsilon 1e-12, no segments); no pooler in
  the backbone either.
* ALBERT: the same math (the tanh GELU on both sides); num_groups = num_layer_groups (KerasHub
  needs num_layers to be a multiple of it), num_inner_repetitions = layers_per_group.
* ELECTRA: KerasHub's blocks compute the tanh-approximate GELU and its `pooled_dense` tanh.
  ELECTRA was trained with the exact GELU (transformers' ElectraModel) and has no pooler: our
  ELECTRA's pooler is its classification head's dense + GELU. The preset is read as our
  ELECTRA (exact GELU, GELU pooler), like BertBackbone's tanh GELU: the sequence output
  differs from KerasHub's by the GELU alone (7.7e-5 of its largest value, 5.2e-4 relative, on
  the tiny random model of tests/checkpoints/test_keras_hub_families.py; BERT's tanh GELU
  moves real MiniLM by 4.2e-3), the pooled output by the pooler's activation.
* DeBERTa-v3: the same math as our block kind "deberta" (exact GELU, epsilon 1e-7, both
  position terms), with its buckets reaching max_sequence_length (an encoder whose
  max_relative_positions differs is refused); no pooler in the backbone: its TextClassifier's
  `pooled_dense` (GELU) is ours. Its tokenizer runs the SentencePiece model's own rules where
  ours runs transformers 5's normalization: the same ids on plain text.
"""

import json
from typing import Callable, NamedTuple

import numpy as np

from keras_bert_suite.checkpoints import keras_hub_names
from keras_bert_suite.checkpoints.split_heads import THEIR_SHAPES
from keras_bert_suite.families.bert_config import BERT_FAMILY_DEFAULTS, ENCODER_CONFIG_KEYS

# KerasHub's BertBackbone hard-wires this epsilon; its config has no key for another one.
BERT_LAYER_NORM_EPSILON = 1e-12


class HubBackbone(NamedTuple):
    """class_name: KerasHub's backbone ("RobertaBackbone").
    family: our family it holds (families/*.py `Family.name`).
    encoder_config: its config.json "config" -> BertEncoder arguments.
    arguments: BertEncoder arguments -> its constructor's (ValueError for what it cannot hold).
    names: {embedding / pooler template: its variable path}; our weights that are not here
        and not in a block are not in the backbone (see the module docstring).
    block: (our block index, BertEncoder arguments) -> its layer's name.
    tokenizer: the kind of its tokenizer, "wordpiece" (written from our vocabulary),
        "byte_pair" or "sentencepiece" (written from our tokenizer of that kind).
    classifier: its TextClassifier, or None.
    masked_lm: its masked-LM task that we read and write, or None.
    positions_from_zero: RoBERTa's: a position table without transformers' rows below the
        offset, and no segment row.
    also_held: {argument: values other than the read-back one that it computes the same, or
        close (ELECTRA's GELUs)}; None: any value.
    block_kind: our encoder's `block` that it holds ("bert": BERT's post-LayerNorm block).
    their_shapes: its variables' shapes where they differ from ours beyond the query / key /
        value split (split_heads.py).
    """

    class_name: str
    family: str
    encoder_config: Callable
    arguments: Callable
    names: dict
    block: Callable
    tokenizer: str
    classifier: str = None
    masked_lm: str = None
    positions_from_zero: bool = False
    also_held: dict = {}
    block_kind: str = "bert"
    their_shapes: dict = THEIR_SHAPES

    @property
    def tokenizer_class(self):
        """KerasHub's tokenizer of this backbone ("RobertaTokenizer")."""
        return self.class_name.replace("Backbone", "Tokenizer")

    def variable_name(self, weight, config):
        """KerasHub's path of weight-table `weight` in this backbone."""
        if weight.layer is None:
            return self.names[weight.template]
        return f"{self.block(weight.layer, config)}/{keras_hub_names.BLOCK_NAMES[weight.template]}"

    def has_pooler(self):
        return "pooler/kernel" in self.names


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


def _bert_arguments(config):
    # Said before the read-back check: BertBackbone's config has no epsilon key at all.
    epsilon = config["layer_norm_epsilon"]
    if not _same("layer_norm_epsilon", epsilon, BERT_LAYER_NORM_EPSILON):
        raise ValueError(
            f"layer_norm_epsilon is {epsilon}, but KerasHub's BertBackbone hard-wires "
            f"{BERT_LAYER_NORM_EPSILON} and its config cannot say otherwise: the preset would "
            f"compute other numbers.")
    return _theirs(config, num_segments=config["num_segments"])


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


def _deberta_config(hub):
    """DebertaV3Backbone: v3's relative attention, both position terms, the buckets reaching
    max_sequence_length (KerasHub's `bucket_size` is transformers' position_buckets)."""
    return _ours(hub, 0, 1e-7, pooler_activation="gelu", block="deberta", block_options={
        "position_buckets": hub.get("bucket_size", 256),
        "max_relative_positions": hub.get("max_sequence_length", 512),
        "pos_att_type": ["p2c", "c2p"]})


def _deberta_arguments(config):
    options = config.get("block_options") or {}
    return _theirs(config, bucket_size=options.get("position_buckets", 256))


def _layer(index, config):
    return f"transformer_layer_{index}"


def _albert_layer(index, config):
    group, inner = divmod(index, config["layers_per_group"])
    return f"group_{group}_inner_layer_{inner}"


# RoBERTa's and XLM-R's backbones differ in their tokenizer and task names alone.
_ROBERTA = dict(family="roberta", positions_from_zero=True, block=_layer, arguments=_theirs,
                encoder_config=lambda hub: _ours(hub, 1, 1e-5, position_offset=2),
                names=keras_hub_names.ROBERTA_EMBEDDING_NAMES,
                also_held={"num_segments": (0,), "position_offset": None})
BACKBONES = {backbone.class_name: backbone for backbone in (
    HubBackbone("BertBackbone", family="bert", tokenizer="wordpiece",
                classifier="BertTextClassifier", masked_lm="BertMaskedLM",
                encoder_config=lambda hub: _ours(hub, hub.get("num_segments", 2),
                                                 BERT_LAYER_NORM_EPSILON),
                arguments=_bert_arguments, names=keras_hub_names.SEPARATE_EMBEDDING_NAMES,
                block=_layer),
    HubBackbone("RobertaBackbone", tokenizer="byte_pair", classifier="RobertaTextClassifier",
                **_ROBERTA),
    HubBackbone("XLMRobertaBackbone", tokenizer="sentencepiece",
                classifier="XLMRobertaTextClassifier", **_ROBERTA),
    HubBackbone("DistilBertBackbone", family="distilbert", tokenizer="wordpiece",
                classifier="DistilBertTextClassifier",
                encoder_config=lambda hub: _ours(hub, 0, 1e-12, pooler_activation="relu"),
                arguments=_theirs, names=keras_hub_names.DISTILBERT_EMBEDDING_NAMES,
                block=_layer),
    HubBackbone("AlbertBackbone", family="albert", tokenizer="sentencepiece",
                classifier="AlbertTextClassifier", block=_albert_layer,
                encoder_config=lambda hub: _ours(
                    hub, hub.get("num_segments", 2), 1e-12, embedding_dim=hub["embedding_dim"],
                    activation="gelu_approximate", num_layer_groups=hub.get("num_groups", 1),
                    layers_per_group=hub.get("num_inner_repetitions", 1)),
                arguments=_albert_arguments, names=keras_hub_names.ALBERT_EMBEDDING_NAMES),
    HubBackbone("ElectraBackbone", family="electra", tokenizer="wordpiece", block=_layer,
                encoder_config=lambda hub: _ours(
                    hub, hub.get("num_segments", 2), 1e-12, pooler_activation="gelu",
                    embedding_dim=None if hub["embedding_dim"] == hub["hidden_dim"]
                    else hub["embedding_dim"]),
                arguments=_electra_arguments, names=keras_hub_names.ELECTRA_EMBEDDING_NAMES,
                # what KerasHub computes itself (read back as ELECTRA's exact GELU + GELU)
                also_held={"activation": ("gelu_approximate",), "pooler_activation": ("tanh",)}),
    # KerasHub's attention output kernel is [H, H] here, as ours; its pooler (pooled_dense,
    # GELU) is its TextClassifier's.
    HubBackbone("DebertaV3Backbone", family="deberta", tokenizer="sentencepiece",
                classifier="DebertaV3TextClassifier", encoder_config=_deberta_config,
                arguments=_deberta_arguments, names=keras_hub_names.DEBERTA_V3_EMBEDDING_NAMES,
                block=lambda index, config: f"disentangled_attention_encoder_layer_{index}",
                block_kind="deberta", their_shapes={}),
)}


def backbone_for(config, sentencepiece=False):
    """The KerasHub backbone that holds encoder `config`, else ValueError saying what it
    cannot hold. `sentencepiece`: the model's tokenizer is XLM-R's, so RoBERTa's architecture
    goes to XLMRobertaBackbone."""
    block = config.get("block") or "bert"
    if block != "bert":  # the row of that block kind (DeBERTa's), if KerasHub has one
        backbone = next((row for row in BACKBONES.values() if row.block_kind == block), None)
        if backbone is None:
            raise ValueError(f"KerasHub's BERT-family backbones hold BERT's block, not this "
                             f"encoder's block={block!r}.")
    elif all(config[key] == value for key, value in BERT_FAMILY_DEFAULTS.items()):
        backbone = BACKBONES["BertBackbone"]
    elif config["num_layer_groups"] is not None:
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
    if block != "bert" and _options(config) != _options(read_back):
        differs.append(f"block_options={config.get('block_options')!r} (it holds "
                       f"{read_back.get('block_options')!r})")
    if differs:
        raise ValueError(f"KerasHub's {backbone.class_name} cannot hold this encoder's "
                         f"{', '.join(differs)}.")
    return backbone


def _options(config):
    """The block options as JSON reads them back (lists, not tuples), None for none."""
    return json.loads(json.dumps(config.get("block_options") or None))


def _same(key, ours, theirs):
    if key == "layer_norm_epsilon":
        return bool(np.isclose(ours, theirs, rtol=1e-6, atol=0))
    return ours == theirs


def _also_held(backbone, key, value):
    if key not in backbone.also_held:
        return False
    values = backbone.also_held[key]
    return values is None or value in values
