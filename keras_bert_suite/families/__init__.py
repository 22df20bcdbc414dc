"""The BERT family, one record per family: what differs from BERT is configuration.

Each family is the same post-LayerNorm encoder (`BertEncoder`) with its own embeddings,
activation, layer sharing and pooler (the encoder's family arguments), and its own
checkpoint names. A `Family` holds what a new family has to say; nothing else in the library
(LoRA, quantization, pruning, distillation, export) names a family.

>>> from keras_bert_suite.families import family_of_model_type
>>> family_of_model_type("xlm-roberta").name
'roberta'
"""

from typing import Callable, NamedTuple

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.families.bert_config import ENCODER_CONFIG_KEYS
from keras_bert_suite.families.module_tree import ModuleTree


class Family(NamedTuple):
    """name: the family's name ("roberta").
    model_types: transformers' `model_type` values of its checkpoints ("roberta", ...).
    prefix: the base model's module prefix in transformers' task models ("roberta.").
    tree: where transformers keeps the weight table's modules (`module_tree.ModuleTree`).
    encoder_config: (transformers config.json as a dict, its path) -> BertEncoder arguments.
    base_model: transformers' class of the encoder alone ("RobertaModel").
    hf_config: BertEncoder arguments -> the family's config.json keys (the inverse of
        `encoder_config`; `model_type` and `architectures` are the writer's).
    presets: {built-in preset name: (description, BertEncoder arguments, lowercase)} of the
        published sizes, architectures only (BERT's are in presets/builtin.py, which lists
        them all).
    unread_heads: {tensor name prefix: why} of heads some checkpoints carry that no class of
        transformers loads either (DeBERTa-v3's original masked-LM head): the reader warns.
    Where a family's task classes keep a task's head, each task declares
    (`checkpoint_form`, checkpoints/task_heads.py).
    """

    name: str
    model_types: tuple
    prefix: str
    tree: ModuleTree
    encoder_config: Callable
    base_model: str
    hf_config: Callable
    presets: dict = {}
    unread_heads: dict = {}

    def class_name(self, suffix):
        """transformers' class of this family with `suffix` ("ForSequenceClassification")."""
        return self.base_model[:-len("Model")] + suffix

    def pretraining_class(self, next_sentence):
        """transformers' class with our pretrainer's heads: {Family}ForMaskedLM, or with a
        sentence-pair head (BERT's next sentence, ALBERT's sentence order)
        {Family}ForPreTraining; None when the family's tree has no such head (RoBERTa,
        DistilBERT and ELECTRA have no sentence-pair head)."""
        if ("nsp" if next_sentence else "mlm/transform") not in self.tree.modules:
            return None
        return self.class_name("ForPreTraining" if next_sentence else "ForMaskedLM")


def families():
    """Every family, BERT first."""
    from keras_bert_suite.families import (albert, bert, deberta, distilbert, electra,
                                           modernbert, roberta)

    return [bert.FAMILY, roberta.FAMILY, distilbert.FAMILY, electra.FAMILY, albert.FAMILY,
            modernbert.FAMILY, deberta.FAMILY]


def family_of_model_type(model_type):
    """The family whose transformers checkpoints carry `model_type`, else None."""
    return next((family for family in families() if model_type in family.model_types), None)


def family_holding(config):
    """The first family whose transformers config holds encoder `config` exactly: written
    with its `hf_config` and read back, every architecture argument comes back unchanged.
    None when no family can (e.g. RoBERTa's positions with ALBERT's shared layers)."""
    return next((family for family in families() if holds(family, config)), None)


def holds(family, config):
    """Whether `family`'s transformers config holds encoder `config` exactly."""
    try:
        written = family.encoder_config(family.hf_config(config), "config.json")
    except UnsupportedCheckpointError:  # a value the family's config cannot say
        return False
    kind = {"block": "bert", "block_options": None}  # BERT's block unless a config says
    return all(written.get(key) == config.get(key) for key in ENCODER_CONFIG_KEYS) and all(
        (written.get(key) or default) == (config.get(key) or default)
        for key, default in kind.items())


def supported_model_types():
    return [model_type for family in families() for model_type in family.model_types]
