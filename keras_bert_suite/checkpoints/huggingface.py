"""Hugging Face directories of the BERT family: config.json (model_type "bert", "roberta",
"xlm-roberta", "distilbert", "electra" or "albert") + model.safetensors (or a sharded
model.safetensors.index.json, or pytorch_model.bin), vocab.txt, tokenizer_config.json.

Weights may sit under the family's prefix (`bert.` in BertForPreTraining, BertForMaskedLM,
...; `roberta.`, `distilbert.`, `electra.`, `albert.`) or at the top level (BertModel);
LayerNorms are `weight`/`bias` or, in old conversions, `gamma`/`beta`. Each family's module
names are its `ModuleTree` (keras_bert_suite/families/).
The pretraining heads (`cls.predictions.*` and `cls.seq_relationship.*`, RoBERTa's `lm_head.*`,
DistilBERT's `vocab_*`, ELECTRA's generator `generator_*`, ALBERT's `predictions.*` and
`sop_classifier.*`) become our `mlm/...` and `nsp/...` weights.
"""

import json
import logging
import os

from keras_bert_suite.checkpoint_errors import CheckpointMismatchError, UnsupportedCheckpointError
from keras_bert_suite.checkpoints import bert_layout, weight_table
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.tensors import TensorSource
from keras_bert_suite.checkpoints.task_heads import ENCODER_POOLER, TransformersHead
from keras_bert_suite.families import family_of_model_type, supported_model_types

NAME = "Hugging Face BERT-family directory"
CONFIG_FILE = "config.json"
# In order of preference; safetensors needs no pickle and reads lazily.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
logger = logging.getLogger(__name__)
FILES_NEEDED = (f"{CONFIG_FILE} with a BERT-family \"model_type\" (\"bert\", \"roberta\", ...) + "
                f"one of {', '.join(WEIGHT_FILES)}")


def matches(directory, config_json):
    # Configs written before transformers had `model_type` still carry the BertConfig keys.
    return config_json is not None and (
        "model_type" in config_json or "num_hidden_layers" in config_json)


def load(directory, load_weights=True):
    config_path = os.path.join(directory, CONFIG_FILE)
    with open(config_path) as f:
        hf_config = json.load(f)
    model_type = hf_config.get("model_type", "bert")
    family = family_of_model_type(model_type)
    if family is None:
        raise UnsupportedCheckpointError(
            f"{config_path}: model_type '{model_type}' is not supported; BertEncoder loads "
            f"the BERT family: {', '.join(supported_model_types())}.")
    config = family.encoder_config(hf_config, config_path)
    weights = head_reader = None
    if load_weights:
        source = _open_weights(directory, config_path)
        weights = _read_weights(source, config, family)

        def head_reader(form):
            return _task_head(source, hf_config, config, family, form.transformers)
    return Checkpoint(config=config, weights=weights, format="huggingface",
                      head_reader=head_reader)


def _read_weights(source, config, family):
    tree = family.tree
    # The tree numbers groups of blocks: ALBERT's num_layer_groups, else one per layer.
    source.check_layer_count(tree.group_pattern,
                             config["num_layer_groups"] or config["num_layers"])
    token_embedding = tree.modules["embeddings/token_embedding"]
    prefix = family.prefix if f"{family.prefix}{token_embedding}.weight" in source else ""
    weights = bert_layout.encoder_weights(config, _Adapter(source, prefix), tree)
    # The pretraining heads are never under the family's prefix.
    weights.update(bert_layout.head_weights(config, _Adapter(source, ""), tree))
    for prefix, why in family.unread_heads.items():
        if any(name.startswith(prefix) for name in source.names):
            logger.warning("%s: %s", source.where, why)
    return weights


def _task_head(source, hf_config, config, family, head):
    """The task's head (`head`: its `TransformersHead`) when the checkpoint is the family's
    class of that task, else None; "pooler" holds the pooler weights that class keeps outside
    the base model (RoBERTa's `classifier.dense`, ...), else nothing."""
    if not isinstance(head, TransformersHead):
        return None
    module, pooler = head.in_family(family.name)
    architectures = hf_config.get("architectures") or []
    if not any(name.endswith(head.suffix) for name in architectures) or (
            f"{module}.weight" not in source):
        return None
    hidden = config["hidden_dim"]
    labels = hf_config.get("id2label") or {}
    units = head.units or len(labels) or hf_config.get("num_labels", 2)
    names = [str(labels[key]) for key in sorted(labels, key=int)]
    default = names == [f"LABEL_{index}" for index in range(len(names))]
    pooler_weights = {}
    if pooler not in (None, ENCODER_POOLER):
        adapter = _Adapter(source, "")
        for weight in weight_table.encoder_weights(config):
            if weight.name.startswith("pooler/"):
                part, variable = weight_table.split_template(weight.template)
                pooler_weights[weight.name] = adapter.get(
                    pooler_module_path(pooler, part), variable, weight.shape)
    return {"kernel": source.get(f"{module}.weight", (units, hidden)).T,
            "bias": source.get(f"{module}.bias", (units,)),
            "label_names": None if default or not names else names,
            "pooler": pooler_weights}


def pooler_module_path(pooler, module):
    """Where a task class that keeps our pooler at module `pooler` ("classifier.dense",
    "head") keeps the pooler's `module` ("pooler", "pooler/dense")."""
    return pooler + module[len("pooler"):].replace("/", ".")


def tensor_name(module, variable):
    """transformers' state-dict name of our `variable` of `module`: a Linear's or LayerNorm's
    `weight` (our kernel [in, out] is its [out, in]; our gamma) or `bias` (our bias, beta);
    an embedding's `weight`."""
    return f"{module}.{'bias' if variable in ('bias', 'beta') else 'weight'}"


def is_output_bias(path, variable):
    """The MLM head's output bias: the one lone tensor (no variable) of a tree that is a bias
    (the others are embedding tables)."""
    return variable is None and path.endswith("bias")


def output_bias_names(path):
    """(the name transformers saves the MLM output bias under, the tied decoder's bias) for
    the tree's `mlm/output_bias` path (BERT's `cls.predictions.output_bias` is Google's)."""
    module = path.rsplit(".", 1)[0]
    return f"{module}.bias", f"{module}.decoder.bias"


class _Adapter:
    """Hugging Face spelling of the shared BERT module tree (see bert_layout.py)."""

    def __init__(self, source, prefix):
        self.source, self.prefix = source, prefix

    def _name(self, path, variable):
        name = f"{self.prefix}{path}"
        if is_output_bias(path, variable):
            # Stored once beside the tied decoder (`cls.predictions.bias`, `lm_head.bias`),
            # or only as the decoder's own bias in some files.
            preferred, in_decoder = output_bias_names(path)
            return preferred if preferred in self.source else in_decoder
        if variable in ("gamma", "beta") and f"{name}.gamma" in self.source:
            return f"{name}.{variable}"  # a LayerNorm in an old conversion's spelling
        return tensor_name(name, variable)

    def has(self, path, variable):
        return self._name(path, variable) in self.source

    def get(self, path, variable, shape):
        name = self._name(path, variable)
        if variable == "kernel":  # torch.nn.Linear stores [out, in]; our kernels are [in, out].
            return self.source.get(name, tuple(reversed(shape))).T
        return self.source.get(name, shape)


def _open_weights(directory, config_path):
    for file_name in WEIGHT_FILES:
        path = os.path.join(directory, file_name)
        if not os.path.exists(path):
            continue
        if file_name == "model.safetensors":
            names, read = _open_safetensors(path)
        elif file_name.endswith(".index.json"):
            names, read = _open_sharded_safetensors(directory, path)
        else:
            names, read = _open_torch_pickle(path)
        return TensorSource(names, read, where=path, config_file=config_path)
    raise CheckpointMismatchError(
        f"{directory} has {CONFIG_FILE} but no weights: expected one of {', '.join(WEIGHT_FILES)}.")


def _open_safetensors(path):
    from safetensors import safe_open

    handle = safe_open(path, framework="numpy")  # reads a tensor only when asked for it
    return list(handle.keys()), handle.get_tensor


def _open_sharded_safetensors(directory, index_path):
    from safetensors import safe_open

    with open(index_path) as f:
        file_of = json.load(f)["weight_map"]  # {tensor name: shard file}
    handles = {}

    def read(name):
        shard = file_of[name]
        if shard not in handles:
            handles[shard] = safe_open(os.path.join(directory, shard), framework="numpy")
        return handles[shard].get_tensor(name)

    return list(file_of), read


def _open_torch_pickle(path):
    try:
        import torch
    except ImportError as error:
        raise ImportError(f"Reading {path} needs PyTorch: pip install torch") from error
    # weights_only=True: a checkpoint must not be able to run code when it is opened.
    state = torch.load(path, map_location="cpu", weights_only=True)

    def read(name):
        tensor = state[name].detach()
        return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()

    return list(state), read

