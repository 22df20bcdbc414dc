"""TF Model Garden's TF2 BERT checkpoints (tensorflow/models, official/nlp): bert_config.json,
an object-based TensorFlow checkpoint and vocab.txt, as the v3 releases ship them
(gs://cloud-tpu-checkpoints/bert/v3/*: bert_model.ckpt.{index,data-*}) and as
tools/tf2_bert_encoder_checkpoint_converter.py writes them (`<name>-1.*` + `checkpoint`).

tf.train.Checkpoint keys a variable by the object path to it, plus `/.ATTRIBUTES/VARIABLE_VALUE`.
Model Garden's BertEncoder is a functional Keras model, which numbers its weighted layers:

    {root}layer_with_weights-0/embeddings          word embeddings      [V, H]
    {root}layer_with_weights-1/embeddings          position embeddings  [P, H]
    {root}layer_with_weights-2/embeddings          type embeddings      [S, H]
    {root}layer_with_weights-3/{gamma,beta}        embedding LayerNorm
    {root}layer_with_weights-{4+i}/                transformer layer i of L:
        _attention_layer/_{query,key,value}_dense/kernel  [H, N, Dh], bias [N, Dh]
        _attention_layer/_output_dense/kernel             [N, Dh, H], bias [H]
        _attention_layer_norm, _intermediate_dense, _output_dense, _output_layer_norm
    {root}layer_with_weights-{4+L}/{kernel,bias}   pooler dense

`{root}` is `encoder/` as released and as Model Garden's trainers save it; any other root is
found by the first transformer layer's query kernel. A BertPretrainerV2 checkpoint (the
converter's `--converted_model=pretrainer`, pretraining runs) also has the masked-LM head,
`masked_lm/{dense,layer_norm}/*` and `masked_lm/output_bias.Sbias`, which is read; the word
embeddings it shares with that head may then be saved once, as `masked_lm/embedding_table`.
Not read: classification (next sentence) heads, optimizer slots. Not supported: BertEncoderV2
(`bert_v2`, keys like `_transformer_layers/0/...`) and factorised embeddings (`embedding_size`,
an extra projection layer). The architecture is not in the checkpoint: bert_config.json is.
"""

import glob
import os
import re

from keras_bert_suite.checkpoints import google_bert, split_heads, weight_table
from keras_bert_suite.checkpoints.errors import (
    CheckpointMismatchError, UnsupportedCheckpointError)
from keras_bert_suite.checkpoints.tensors import TensorSource

NAME = "TF Model Garden TF2 BERT checkpoint"
FILES_NEEDED = (f"{google_bert.CONFIG_FILE} + an object-based TF2 checkpoint "
                f"({google_bert.CHECKPOINT_PREFIX}.index + .data-*, or a `checkpoint` file's)")
SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"  # what tf.train.Checkpoint appends to an object path
FIRST_BLOCK = 4  # layer_with_weights-{4 + i} is transformer layer i; 4 + L is the pooler

# Table template -> Model Garden's object path (for a transformer layer's, under its
# `layer_with_weights-{4+i}/`). `{part}`: Model Garden keeps query, key and value apart.
MODEL_GARDEN_NAMES = {
    "embeddings/token_embedding": "layer_with_weights-0/embeddings",
    "embeddings/position_embedding": "layer_with_weights-1/embeddings",
    "embeddings/segment_embedding": "layer_with_weights-2/embeddings",
    "embeddings/layer_norm/gamma": "layer_with_weights-3/gamma",
    "embeddings/layer_norm/beta": "layer_with_weights-3/beta",
    "attention/qkv/kernel": "_attention_layer/_{part}_dense/kernel",  # 3 x [H, N, Dh], axis 1
    "attention/qkv/bias": "_attention_layer/_{part}_dense/bias",  # 3 x [N, Dh], axis 0
    "attention/output/kernel": "_attention_layer/_output_dense/kernel",  # [N, Dh, H]
    "attention/output/bias": "_attention_layer/_output_dense/bias",
    "attention_layer_norm/gamma": "_attention_layer_norm/gamma",
    "attention_layer_norm/beta": "_attention_layer_norm/beta",
    "intermediate/kernel": "_intermediate_dense/kernel",
    "intermediate/bias": "_intermediate_dense/bias",
    "output/kernel": "_output_dense/kernel",
    "output/bias": "_output_dense/bias",
    "output_layer_norm/gamma": "_output_layer_norm/gamma",
    "output_layer_norm/beta": "_output_layer_norm/beta",
    "pooler/kernel": "layer_with_weights-{pooler}/kernel",
    "pooler/bias": "layer_with_weights-{pooler}/bias",
}
# The masked-LM head (official/nlp/modeling/layers/masked_lm.py), under `masked_lm/`.
MLM_NAMES = {
    "mlm/transform/kernel": "dense/kernel",
    "mlm/transform/bias": "dense/bias",
    "mlm/layer_norm/gamma": "layer_norm/gamma",
    "mlm/layer_norm/beta": "layer_norm/beta",
    "mlm/output_bias": "output_bias.Sbias",  # the `bias` variable of `output_bias`, escaped
}
SHARED_WORD_EMBEDDINGS = "masked_lm/embedding_table"
_BLOCK = re.compile(r"^(.*)layer_with_weights-(\d+)/_attention_layer/")


def matches(directory, config_json):
    """A directory whose TensorFlow checkpoint is object-based; without bert_config.json too,
    so that `load` can say that it is needed."""
    if not glob.glob(os.path.join(directory, "*.index")):
        return False
    try:
        return is_object_based(google_bert.find_checkpoint_prefix(directory))
    except CheckpointMismatchError:  # no single checkpoint: google_bert's reader says so
        return False


def is_object_based(prefix):
    """TF2's tf.train.Checkpoint (Model Garden) rather than TF1's Saver (google-research/bert)."""
    import tensorflow as tf

    names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return any(name.endswith(SUFFIX) for name in names)


def load(directory, load_weights=True, checkpoint_prefix=None):
    """`checkpoint_prefix` picks one checkpoint (e.g. `.../ckpt-1000`) in `directory`."""
    if not os.path.exists(os.path.join(directory, google_bert.CONFIG_FILE)):
        raise CheckpointMismatchError(
            f"{checkpoint_prefix or directory} is a TF Model Garden (object-based TF2) "
            f"checkpoint, but {directory} has no {google_bert.CONFIG_FILE}: the checkpoint "
            f"holds weights only, not the architecture. Put the {google_bert.CONFIG_FILE} it "
            f"was trained with beside it (the v3 releases ship one).")
    return google_bert.load_directory(
        directory, _read_weights, "model_garden", load_weights, checkpoint_prefix)


def _read_weights(prefix, config, config_path):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    names = reader.get_variable_to_shape_map()
    source = TensorSource(names, reader.get_tensor, where=f"checkpoint {prefix}",
                          config_file=config_path)
    root = _encoder_root(names, prefix)
    # A block past the config's layers would be dropped silently, or the first misread as
    # the pooler (`layer_with_weights-{4+L}`).
    source.check_layer_count(f"^{re.escape(root)}layer_with_weights-(\\d+)/_attention_layer/",
                             config["num_layers"], first_index=FIRST_BLOCK)
    sizes, weights = weight_table.dimensions(config), {}
    for weight in weight_table.encoder_weights(config):
        key = _key(weight, root, config["num_layers"], names)
        weights[weight.name] = split_heads.read(source, weight, key, sizes)
    head_root = _root(names, f"masked_lm/{MLM_NAMES['mlm/transform/kernel']}{SUFFIX}", prefix)
    if head_root is not None:
        for weight in weight_table.head_weights("mlm", config):
            key = f"{head_root}masked_lm/{MLM_NAMES[weight.name]}{SUFFIX}"
            weights[weight.name] = source.get(key, weight.shape)
    return weights


def _key(weight, root, num_layers, names):
    name = MODEL_GARDEN_NAMES[weight.template].replace("{pooler}", str(FIRST_BLOCK + num_layers))
    if weight.layer is not None:
        name = f"layer_with_weights-{FIRST_BLOCK + weight.layer}/{name}"
    key = root + name + SUFFIX
    if weight.name == "embeddings/token_embedding" and key not in names:
        shared = [n for n in names if n.endswith(SHARED_WORD_EMBEDDINGS + SUFFIX)]
        return shared[0] if len(shared) == 1 else key  # else the missing key is reported
    return key


def _encoder_root(names, prefix):
    """What precedes `layer_with_weights-{n}/_attention_layer/`: `encoder/` as released."""
    roots = sorted({found.group(1) for found in map(_BLOCK.match, names) if found})
    if len(roots) != 1:
        example = f"layer_with_weights-{FIRST_BLOCK}/_attention_layer/_query_dense/kernel{SUFFIX}"
        raise UnsupportedCheckpointError(
            f"checkpoint {prefix} is object-based but holds "
            f"{'no' if not roots else f'several ({roots})'} Model Garden BertEncoder: expected "
            f"one object path before transformer layer variables like 'encoder/{example}'. "
            f"BertEncoderV2 ('bert_v2') checkpoints are not supported.")
    return roots[0]


def _root(names, suffix, prefix):
    """The one object path before `suffix` among the checkpoint's keys, or None."""
    roots = sorted({name[: -len(suffix)] for name in names if name.endswith(suffix)})
    if len(roots) > 1:
        raise UnsupportedCheckpointError(
            f"checkpoint {prefix} has several objects ending in '{suffix}': under {roots}. "
            f"Only one BERT encoder per checkpoint can be read.")
    return roots[0] if roots else None
