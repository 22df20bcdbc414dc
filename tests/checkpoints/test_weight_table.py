"""One table for the weight names: every reader, every converter map and the model give the
names and shapes of `checkpoints/weight_table.py`, no more and no fewer."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.checkpoints import keras_hub_names, load_checkpoint, weight_table
from keras_bert_suite.checkpoints.keras_hub_backbones import BACKBONES
from keras_bert_suite.checkpoints.keras_hub_weights import from_keras_hub, to_keras_hub
from keras_bert_suite.families import families
from keras_bert_suite.families import module_tree
from keras_bert_suite.layers.blocks import block_kind
from keras_bert_suite.models import weight_names
from tests.checkpoints.checkpoint_writers import (
    bert_config_json, google_head_variables, google_variables, write_google_dir)


def _shapes(weights):
    return {name: tuple(np.shape(value)) for name, value in weights.items()}


def test_every_map_names_exactly_the_table():
    """A misspelled or stale entry in a per-format map cannot hide: the keys are the table's
    (BERT's tree and KerasHub's BERT have everything but the embedding projection and
    ELECTRA's replaced-token head)."""
    not_bert = {"embeddings/projection", "rtd/dense", "rtd/prediction"}
    bert_block = block_kind("bert")
    # the table's modules of BERT's block kind (other kinds add their own rows)
    bert_modules = {weight_table.split_template(template)[0] for template in (
        *weight_table.EMBEDDING_WEIGHTS, *bert_block.weights, *weight_table.POOLER_WEIGHTS,
        *(template for head in weight_table.HEAD_WEIGHTS.values() for template in head))}
    assert bert_modules <= set(weight_table.modules())
    assert set(module_tree.MODULES) == bert_modules - not_bert
    assert {*weight_names._MODULES, "pooler", *bert_block.modules} == bert_modules
    assert {weight_table.split_template(template)[0] for template in bert_block.weights} == set(
        bert_block.modules)
    encoder_templates = {*weight_table.EMBEDDING_WEIGHTS, *bert_block.weights,
                         *weight_table.POOLER_WEIGHTS}
    bert_backbone = BACKBONES["BertBackbone"]
    assert {*keras_hub_names.BLOCK_NAMES, *bert_backbone.names} == {
        template for template in encoder_templates if not template.startswith(
            "embeddings/projection/")}
    for family in families():
        assert set(family.tree.modules) <= set(weight_table.modules()), family.name


def test_table_shapes_follow_the_config():
    config = {"vocabulary_size": 50, "num_layers": 2, "num_heads": 2, "hidden_dim": 8,
              "intermediate_dim": 16, "max_sequence_length": 16, "num_segments": 2}
    shapes = weight_table.encoder_weight_shapes(config)

    assert len(shapes) == len(weight_table.EMBEDDING_WEIGHTS) - 2 + 2 * len(
        block_kind("bert").weights) + len(weight_table.POOLER_WEIGHTS)  # no projection
    assert shapes["embeddings/token_embedding"] == (50, 8)
    assert shapes["layer_1/attention/qkv/kernel"] == (8, 3, 2, 4)
    assert shapes["layer_1/intermediate/kernel"] == (8, 16)
    assert weight_table.head_weight_shapes("mlm", config)["mlm/output_bias"] == (50,)
    assert weight_table.head_weight_shapes("nsp", config)["nsp/kernel"] == (8, 2)
    encoder = BertEncoder(**config)
    assert _shapes(encoder.weight_map()) == shapes
    assert list(encoder.weight_map()) == list(shapes)  # checkpoint order too


def test_table_shapes_follow_a_family_config():
    """ALBERT-like (E-wide embeddings + projection, 4 layers sharing 2 groups of 2 blocks)
    without segments and with RoBERTa's position offset: the table and the model agree."""
    config = {"vocabulary_size": 50, "num_layers": 4, "num_heads": 2, "hidden_dim": 8,
              "intermediate_dim": 16, "max_sequence_length": 16, "num_segments": 0,
              "embedding_dim": 6, "position_offset": 2, "num_layer_groups": 2,
              "layers_per_group": 2}
    shapes = weight_table.encoder_weight_shapes(config)
    assert "embeddings/segment_embedding" not in shapes
    assert shapes["embeddings/token_embedding"] == (50, 6)
    assert shapes["embeddings/position_embedding"] == (18, 6)  # 16 + the offset's 2 rows
    assert shapes["embeddings/layer_norm/gamma"] == (6,)
    assert shapes["embeddings/projection/kernel"] == (6, 8)
    assert "layer_3/output/kernel" in shapes and "layer_4/output/kernel" not in shapes
    assert weight_table.head_weight_shapes("mlm", config)["mlm/transform/kernel"] == (8, 6)
    encoder = BertEncoder(**config)
    assert encoder.layer_blocks == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert _shapes(encoder.weight_map()) == shapes
    assert list(encoder.weight_map()) == list(shapes)


@pytest.mark.real
def test_every_reader_gives_the_table_names_and_shapes(
        tmp_path, minilm_dir, minilm_checkpoint, minilm_tensors):
    config = minilm_checkpoint.config
    table = weight_table.encoder_weight_shapes(config)
    heads = {**weight_table.head_weight_shapes("mlm", config),
             **weight_table.head_weight_shapes("nsp", config)}
    encoder = BertEncoder(**config)
    assert _shapes(encoder.weight_map()) == table

    assert _shapes(minilm_checkpoint.weights) == table  # Hugging Face (MiniLM has no heads)

    with open(os.path.join(minilm_dir, "config.json")) as f:
        hf_config = json.load(f)
    variables = google_variables(minilm_tensors, config["num_layers"])
    variables.update(google_head_variables(config["hidden_dim"], config["vocabulary_size"]))
    google_dir = write_google_dir(tmp_path / "google", bert_config_json(hf_config), variables)
    assert _shapes(load_checkpoint(google_dir).weights) == {**table, **heads}

    ours = {name: keras.ops.convert_to_numpy(value)
            for name, value in encoder.weight_map().items()}
    bert_backbone = BACKBONES["BertBackbone"]
    theirs = to_keras_hub(bert_backbone, ours, config)
    assert _shapes(from_keras_hub(bert_backbone, theirs, config)) == table

    encoder.save_preset(tmp_path / "ours")
    assert _shapes(load_checkpoint(str(tmp_path / "ours")).weights) == table


@pytest.mark.real
def test_keras_hub_names_are_bert_backbones(minilm_checkpoint):
    """The template map gives exactly the variable paths (and shapes) of KerasHub's model."""
    keras_hub_package = pytest.importorskip("keras_hub")
    config = minilm_checkpoint.config
    backbone = keras_hub_package.models.BertBackbone(
        **{key: value for key, value in config.items()
           if key not in ("layer_norm_epsilon", "initializer_range")})
    theirs = to_keras_hub(BACKBONES["BertBackbone"], minilm_checkpoint.weights, config)

    assert _shapes(theirs) == {w.path: tuple(w.shape) for w in backbone.weights}
