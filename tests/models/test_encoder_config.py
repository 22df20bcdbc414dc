"""The encoder's arguments are written once (`EncoderConfig`): the signature, attributes,
get_config and the checkpoint keys all come from it, and configs written before it load."""

import inspect

import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.families.bert_config import BERT_FAMILY_DEFAULTS, ENCODER_CONFIG_KEYS
from keras_bert_suite.encoder_config import EncoderConfig

SIZES = dict(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)


def test_signature_and_help_show_every_argument():
    parameters = list(inspect.signature(BertEncoder.__init__).parameters)
    assert parameters == ["self", *EncoderConfig.names(), "kwargs"]
    assert inspect.signature(BertEncoder).parameters["max_sequence_length"].default == 512
    assert "num_layer_groups" in BertEncoder.__doc__


def test_positional_and_keyword_arguments_build_the_same_encoder():
    by_position = BertEncoder(30, 2, 2, 8, 16, 12, name="positional")
    assert by_position.name == "positional"
    assert by_position.config == EncoderConfig(**SIZES, max_sequence_length=12)
    assert by_position.max_sequence_length == 12 and by_position.block == "bert"
    with pytest.raises(TypeError):
        BertEncoder(30, 2, 2, 8, 16, vocabulary_size=30)


def test_get_config_lists_the_fields_and_an_older_config_loads():
    encoder = BertEncoder(**SIZES, dropout=0.0)
    config = encoder.get_config()
    assert {"name", "trainable", "dtype", *EncoderConfig.names()} == set(config)
    older = {key: value for key, value in config.items() if key not in ("block", "causal")}
    assert BertEncoder.from_config(older).config.replace(dtype=None) == encoder.config


def test_checkpoint_keys_and_family_defaults_are_the_fields_roles():
    assert ENCODER_CONFIG_KEYS == (
        "vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
        "max_sequence_length", "num_segments", "dropout", "layer_norm_epsilon",
        "initializer_range", "embedding_dim", "position_offset", "activation",
        "pooler_activation", "num_layer_groups", "layers_per_group")
    assert BERT_FAMILY_DEFAULTS == {
        "embedding_dim": None, "position_offset": 0, "activation": "gelu",
        "pooler_activation": "tanh", "num_layer_groups": None, "layers_per_group": 1}


def test_the_config_checks_its_values_and_names_the_block_kinds():
    with pytest.raises(ValueError, match="pooler_activation"):
        EncoderConfig(**SIZES, pooler_activation="swish")
    with pytest.raises(ValueError, match="layer_num_heads has 1 entries"):
        EncoderConfig(**SIZES, layer_num_heads=[2])
    with pytest.raises(ValueError, match="block must be one of"):
        BertEncoder(**SIZES, block="no_such_block")
    with pytest.raises(ValueError, match="block 'bert' takes no block_options"):
        BertEncoder(**SIZES, block_options={"local_attention": 8})
    with pytest.raises(ValueError, match="block_options of block 'modernbert'"):
        BertEncoder(**SIZES, block="modernbert", block_options={"window": 8})
