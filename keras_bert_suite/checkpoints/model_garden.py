"""TF Model Garden's TF2 encoder checkpoints (tensorflow/models, official/nlp): a config json,
an object-based TensorFlow checkpoint and vocab.txt, as the v3 BERT releases ship them
(gs://cloud-tpu-checkpoints/bert/v3/*: bert_model.ckpt.{index,data-*}) and as
tools/tf2_{bert,albert}_encoder_checkpoint_converter.py write them (`<name>-1.*` + `checkpoint`).
Three encoders: BertEncoder, BertEncoder with `embedding_width` (factorised embeddings, as
Model Garden's ELECTRA pretrainer saves its discriminator: `encoder` of checkpoint_items) and
AlbertEncoder (one transformer block shared by every layer).

tf.train.Checkpoint keys a variable by the object path to it, plus `/.ATTRIBUTES/VARIABLE_VALUE`.
Model Garden's encoders are functional Keras models, which number their weighted layers:

    {root}layer_with_weights-0/embeddings          word embeddings      [V, E]
    {root}layer_with_weights-1/embeddings          position embeddings  [P, E]
    {root}layer_with_weights-2/embeddings          type embeddings      [S, E]
    {root}layer_with_weights-3/{gamma,beta}        embedding LayerNorm
   ({root}layer_with_weights-4/{kernel,bias}       embedding projection [E, H], when E != H)
    {root}layer_with_weights-{F+i}/                transformer block i; F = 4, or 5 after a
                                                   projection:
        _attention_layer/_{query,key,value}_dense/kernel  [H, N, Dh], bias [N, Dh]
        _attention_layer/_output_dense/kernel             [N, Dh, H], bias [H]
        _attention_layer_norm, _intermediate_dense, _output_dense, _output_layer_norm
    {root}layer_with_weights-{F+B}/{kernel,bias}   pooler dense (tanh)

B blocks: num_hidden_layers for BertEncoder, 1 for AlbertEncoder. `{root}` is `encoder/` as
released and as Model Garden's trainers save it; any other root is found by the first
transformer layer's query kernel. A BertPretrainerV2 checkpoint (the converters'
`--converted_model=pretrainer`, pretraining runs) also has the masked-LM head,
`masked_lm/{dense,layer_norm}/*` and `masked_lm/output_bias.Sbias`, which is read; the word
embeddings it shares with that head may then be saved once, as `masked_lm/embedding_table`.

The architecture is not in the checkpoint; the config json is: albert_config.json for an
AlbertEncoder, else bert_config.json (+ `embedding_size`); see model_garden_config.py. Which
encoder the checkpoint holds is checked against its keys (a projection or not, one shared
block or one per layer), and a mismatch names the config key to fix.
Not read: classification (next sentence) heads, optimizer slots, the ELECTRA generator. Not
supported: BertEncoderV2 (`bert_v2`, keys like `_transformer_layers/0/...`); ALBERT's
SentencePiece vocabulary (30k-clean.model) is not read, only a vocab.txt beside the checkpoint.
"""

import glob
import os
import re

from keras_bert_suite.checkpoint_errors import (
    CheckpointMismatchError, UnsupportedCheckpointError)
from keras_bert_suite.checkpoints import google_bert, split_heads, weight_table
from keras_bert_suite.checkpoints.model_garden_config import (
    ALBERT_CONFIG_FILE, albert_encoder_config, bert_encoder_config)
from keras_bert_suite.checkpoints.tensors import TensorSource

NAME = "TF Model Garden TF2 BERT checkpoint (BERT, ALBERT, ELECTRA encoders)"
FILES_NEEDED = (f"{google_bert.CONFIG_FILE} ({ALBERT_CONFIG_FILE} for ALBERT) + an "
                f"object-based TF2 checkpoint ({google_bert.CHECKPOINT_PREFIX}.index + "
                f".data-*, or a `checkpoint` file's)")
SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"  # what tf.train.Checkpoint appends to an object path
FIRST_BLOCK = 4  # layer_with_weights-{4 + i} is transformer block i; 4 + B is the pooler
PROJECTION = "layer_with_weights-4"  # an embedding projection takes 4; the blocks move by one

# Table template -> Model Garden's object path (for a transformer block's, under its
# `layer_with_weights-{F+i}/`). `{part}`: Model Garden keeps query, key and value apart.
MODEL_GARDEN_NAMES = {
    "embeddings/token_embedding": "layer_with_weights-0/embeddings",
    "embeddings/position_embedding": "layer_with_weights-1/embeddings",
    "embeddings/segment_embedding": "layer_with_weights-2/embeddings",
    "embeddings/layer_norm/gamma": "layer_with_weights-3/gamma",
    "embeddings/layer_norm/beta": "layer_with_weights-3/beta",
    "embeddings/projection/kernel": f"{PROJECTION}/kernel",  # [E, H]
    "embeddings/projection/bias": f"{PROJECTION}/bias",
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
    if os.path.exists(os.path.join(directory, ALBERT_CONFIG_FILE)):
        return google_bert.load_directory(
            directory, _read_weights, "model_garden", load_weights, checkpoint_prefix,
            config_file=ALBERT_CONFIG_FILE, read_config=albert_encoder_config)
    if not os.path.exists(os.path.join(directory, google_bert.CONFIG_FILE)):
        raise CheckpointMismatchError(
            f"{checkpoint_prefix or directory} is a TF Model Garden (object-based TF2) "
            f"checkpoint, but {directory} has no {google_bert.CONFIG_FILE}: the checkpoint "
            f"holds weights only, not the architecture. Put the {google_bert.CONFIG_FILE} it "
            f"was trained with beside it (the v3 releases ship one; an AlbertEncoder's is "
            f"{ALBERT_CONFIG_FILE}).")
    return google_bert.load_directory(
        directory, _read_weights, "model_garden", load_weights, checkpoint_prefix,
        read_config=bert_encoder_config)


def _read_weights(prefix, config, config_path):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    names = reader.get_variable_to_shape_map()
    source = TensorSource(names, reader.get_tensor, where=f"checkpoint {prefix}",
                          config_file=config_path)
    root, other_encoders = _encoder_root(names, prefix)
    first = _first_block(names, root, config, prefix, config_path)
    _check_blocks(source, root, first, config, config_path)
    sizes, weights = weight_table.dimensions(config), {}
    pooler = first + weight_table.num_blocks(config)
    for weight in weight_table.encoder_weights(config):
        key = _key(weight, root, first, pooler, names)
        weights[weight.name] = split_heads.read(source, weight, key, sizes)
    head_root = _root(names, f"masked_lm/{MLM_NAMES['mlm/transform/kernel']}{SUFFIX}", prefix)
    if head_root is not None and not other_encoders:  # else it is ELECTRA's generator's
        for weight in weight_table.head_weights("mlm", config):
            key = f"{head_root}masked_lm/{MLM_NAMES[weight.name]}{SUFFIX}"
            weights[weight.name] = source.get(key, weight.shape)
    return weights


def _first_block(names, root, config, prefix, config_path):
    """The first transformer block's layer number: after the embedding projection if any,
    which the checkpoint must have exactly when the config has an embedding width."""
    kernel = f"{root}{PROJECTION}/kernel{SUFFIX}"
    if (kernel in names) == (config["embedding_dim"] is not None):
        return FIRST_BLOCK + (kernel in names)
    if kernel in names:
        width = names[kernel][0]
        raise CheckpointMismatchError(
            f"checkpoint {prefix} has an embedding projection '{kernel}' of shape "
            f"{tuple(names[kernel])} (factorised embeddings of width {width}, as ELECTRA's and "
            f"ALBERT's), but {config_path} describes none: add \"embedding_size\": {width} to it.")
    raise CheckpointMismatchError(
        f"{config_path} says embedding_size={config['embedding_dim']} (an embedding projection "
        f"to hidden_size={config['hidden_dim']}), but checkpoint {prefix} has none (no "
        f"'{kernel}'): remove embedding_size, or set it to hidden_size.")


def _check_blocks(source, root, first, config, config_path):
    """A block past the config's would be dropped silently, or misread as the pooler; one
    block where bert_config.json says several is an AlbertEncoder's shared block."""
    pattern = f"^{re.escape(root)}layer_with_weights-(\\d+)/_attention_layer/"
    found = sorted({int(m.group(1)) for m in map(re.compile(pattern).match, source.names) if m})
    if config["num_layer_groups"] is not None and len(found) > 1:
        raise CheckpointMismatchError(
            f"{source.where} has {len(found)} transformer blocks (layer_with_weights-"
            f"{found[0]}..{found[-1]}), but {config_path} describes an AlbertEncoder, whose "
            f"layers share one block. A BertEncoder's config is {google_bert.CONFIG_FILE}.")
    if config["num_layer_groups"] is None and found == [first] and config["num_layers"] > 1:
        raise CheckpointMismatchError(
            f"{source.where} has one transformer block (layer_with_weights-{first}) but "
            f"{config_path} says num_hidden_layers={config['num_layers']}: one block shared by "
            f"every layer is Model Garden's AlbertEncoder, whose config is "
            f"{ALBERT_CONFIG_FILE}; put that beside the checkpoint instead.")
    source.check_layer_count(pattern, weight_table.num_blocks(config), first_index=first)


def _key(weight, root, first, pooler, names):
    name = MODEL_GARDEN_NAMES[weight.template].replace("{pooler}", str(pooler))
    if weight.layer is not None:
        name = f"layer_with_weights-{first + weight.layer}/{name}"
    key = root + name + SUFFIX
    if weight.name == "embeddings/token_embedding" and key not in names:
        shared = [n for n in names if n.endswith(SHARED_WORD_EMBEDDINGS + SUFFIX)]
        return shared[0] if len(shared) == 1 else key  # else the missing key is reported
    return key


def _encoder_root(names, prefix):
    """(what precedes `layer_with_weights-{n}/_attention_layer/`, whether other encoders are
    there). `encoder/` as released, and as a trainer saves its model's checkpoint_items: an
    ELECTRA pretrainer's discriminator, beside its generator (`model/generator_network/`)."""
    roots = sorted({found.group(1) for found in map(_BLOCK.match, names) if found})
    if len(roots) > 1 and "encoder/" in roots:
        return "encoder/", True
    if len(roots) != 1:
        example = f"layer_with_weights-{FIRST_BLOCK}/_attention_layer/_query_dense/kernel{SUFFIX}"
        raise UnsupportedCheckpointError(
            f"checkpoint {prefix} is object-based but holds "
            f"{'no' if not roots else f'several ({roots})'} Model Garden BertEncoder: expected "
            f"one object path before transformer layer variables like 'encoder/{example}'. "
            f"BertEncoderV2 ('bert_v2') checkpoints are not supported.")
    return roots[0], False


def _root(names, suffix, prefix):
    """The one object path before `suffix` among the checkpoint's keys, or None."""
    roots = sorted({name[: -len(suffix)] for name in names if name.endswith(suffix)})
    if len(roots) > 1:
        raise UnsupportedCheckpointError(
            f"checkpoint {prefix} has several objects ending in '{suffix}': under {roots}. "
            f"Only one BERT encoder per checkpoint can be read.")
    return roots[0] if roots else None
