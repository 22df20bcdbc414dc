"""BertEncoder with per-layer sizes (what pruning produces), on a tiny random encoder: the
shared harness, config round trips, unchanged default configs, the checks on bad lists,
LoRA on a pruned encoder, and the writers of other libraries' formats refusing it."""

import json

import keras
import numpy as np
import pytest

from keras_bert_suite import (
    BertEncoder, save_google_bert, save_huggingface, save_keras_hub)
from keras_bert_suite.layers import BertSelfAttention, TransformerBlock
from keras_bert_suite.models.lora import parameter_count
from tests.conftest import to_numpy
from tests.harness import run_layer_test

VOCABULARY, HIDDEN, HEADS, FFN = 50, 16, 4, 32  # head size 4
TINY = dict(vocabulary_size=VOCABULARY, num_layers=3, num_heads=HEADS, hidden_dim=HIDDEN,
            intermediate_dim=FFN, max_sequence_length=16)
PER_LAYER = dict(layer_num_heads=[4, 1, 2], layer_intermediate_dims=[32, 5, 1])


def _inputs(batch=2, length=6):
    rng = np.random.default_rng(0)
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 4:] = 0
    return {"token_ids": rng.integers(0, VOCABULARY, (batch, length)).astype("int32"),
            "segment_ids": np.zeros((batch, length), "int32"), "padding_mask": padding_mask}


def test_per_layer_encoder_through_the_harness():
    inputs = _inputs()
    encoder, _ = run_layer_test(
        BertEncoder, {**TINY, **PER_LAYER}, inputs,
        expected_output_shape={"sequence_output": (2, 6, HIDDEN), "pooled_output": (2, HIDDEN)})
    shapes = {name: tuple(v.shape) for name, v in encoder.weight_map().items()}
    head = HIDDEN // HEADS
    assert shapes["layer_1/attention/qkv/kernel"] == (HIDDEN, 3, 1, head)  # [H, 3, N', Dh]
    assert shapes["layer_1/attention/qkv/bias"] == (3, 1, head)
    assert shapes["layer_2/attention/output/kernel"] == (2 * head, HIDDEN)  # [N' Dh, H]
    assert shapes["layer_1/intermediate/kernel"] == (HIDDEN, 5)
    assert shapes["layer_2/output/kernel"] == (1, HIDDEN)
    assert encoder.is_pruned


def test_pruned_attention_and_block_layers_through_the_harness():
    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    mask = np.ones((2, 1, 1, 5), bool)
    # 3 heads of size 4 in a hidden size of 8: the attention width (12) is not hidden_dim.
    attention, _ = run_layer_test(
        BertSelfAttention, {"num_heads": 3, "hidden_dim": 8, "head_dim": 4},
        {"x": x, "attention_mask": mask}, expected_output_shape=(2, 5, 8))
    assert tuple(attention.output_dense.kernel.shape) == (12, 8)
    run_layer_test(TransformerBlock, {"num_heads": 1, "hidden_dim": 8, "intermediate_dim": 3,
                                      "head_dim": 4},
                   {"x": x, "attention_mask": mask}, expected_output_shape=(2, 5, 8))


def test_default_configs_are_unchanged_and_lists_round_trip():
    plain = BertEncoder(**TINY)
    config = plain.get_config()
    assert config["layer_num_heads"] is None and config["layer_intermediate_dims"] is None
    assert not plain.is_pruned
    block = plain.transformer_layers[0]
    assert block.get_config()["head_dim"] is None
    assert block.attention.get_config()["head_dim"] is None

    pruned = BertEncoder(**TINY, **PER_LAYER)
    config = json.loads(json.dumps(pruned.get_config()))
    assert config["layer_num_heads"] == [4, 1, 2]
    back = BertEncoder.from_config(config)
    assert [b.attention.num_heads for b in back.transformer_layers] == [4, 1, 2]
    assert [b.intermediate_dim for b in back.transformer_layers] == [32, 5, 1]
    # A pruned layer's blocks name the unpruned head size; an unpruned one leaves it None.
    assert [b.get_config()["head_dim"] for b in back.transformer_layers] == [None, 4, 4]


def test_parameter_count_of_per_layer_sizes():
    plain, pruned = BertEncoder(**TINY), BertEncoder(**TINY, **PER_LAYER)
    head = HIDDEN // HEADS
    per_head = HIDDEN * 3 * head + 3 * head + head * HIDDEN  # qkv kernel + bias, output rows
    per_neuron = HIDDEN + 1 + HIDDEN  # intermediate column + bias, output row
    removed_heads, removed_neurons = (0 + 3 + 2), (0 + 27 + 31)
    assert plain.count_params() - pruned.count_params() == (
        removed_heads * per_head + removed_neurons * per_neuron)


@pytest.mark.parametrize("arguments, message", [
    ({"layer_num_heads": [4, 4]}, r"layer_num_heads has 2 entries but the encoder has 3 "
                                  r"transformer blocks"),
    ({"layer_num_heads": [4, 0, 2]}, r"layer_num_heads\[1\] is 0: layer 1 needs a positive"),
    ({"layer_intermediate_dims": [32, 2.5, 1]}, r"layer_intermediate_dims\[1\] is 2.5"),
    ({"layer_intermediate_dims": [32, True, 1]}, r"layer_intermediate_dims\[1\] is True"),
    ({"layer_num_heads": 4}, r"layer_num_heads must be None or a list of 3 positive"),
])
def test_bad_per_layer_sizes_are_clear_errors(arguments, message):
    with pytest.raises(ValueError, match=message):
        BertEncoder(**TINY, **arguments)


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="keras.distribution is absent on PyTorch (Keras 3.15)")
def test_a_model_parallel_split_that_cannot_hold_whole_heads_is_a_clear_error():
    from keras import distribution as kd

    mesh = kd.DeviceMesh((1, 2), ("batch", "model"), ["cpu:0", "cpu:1"])
    distribution = kd.ModelParallel(layout_map=BertEncoder.get_layout_map(mesh),
                                    batch_dim_name="batch")
    with distribution.scope():
        with pytest.raises(ValueError, match=r"Layer 1 has 1 attention heads, which the "
                                             r"'model' mesh axis \(2 devices\) cannot split"):
            BertEncoder(**TINY, layer_num_heads=[4, 1, 2])
        with pytest.raises(ValueError, match=r"Layer 1 has 5 feed-forward neurons"):
            BertEncoder(**TINY, layer_num_heads=[4, 2, 2], layer_intermediate_dims=[32, 5, 2])


def test_lora_on_a_pruned_encoder():
    encoder = BertEncoder(**TINY, **PER_LAYER)
    inputs = _inputs()
    expected = to_numpy(encoder(inputs)["sequence_output"])
    with pytest.raises(ValueError, match=r"lora_rank=2 is larger than layer "
                                         r"'transformer_layer_2/intermediate' \(16 -> 1\)"):
        encoder.enable_lora(2)
    encoder.enable_lora(1)
    np.testing.assert_array_equal(to_numpy(encoder(inputs)["sequence_output"]), expected)
    layers = encoder.transformer_layers
    qkv = (HIDDEN + 3 * 4 * 4) + (HIDDEN + 1 * 3 * 4) + (HIDDEN + 2 * 3 * 4)
    output = (4 * 4 + HIDDEN) + (1 * 4 + HIDDEN) + (2 * 4 + HIDDEN)
    ffn = sum(2 * (HIDDEN + width) for width in (32, 5, 1))
    assert parameter_count(encoder.trainable_weights) == qkv + output + ffn
    assert len(layers) == 3


@pytest.mark.parametrize("writer", [save_huggingface, save_google_bert, save_keras_hub])
def test_other_formats_refuse_a_pruned_encoder(writer, tmp_path):
    encoder = BertEncoder(**TINY, layer_num_heads=[4, 1, 2])
    with pytest.raises(ValueError, match=rf"{writer.__name__}: this encoder is pruned "
                                         r"\(layer_num_heads=\[4, 1, 2\]\).*save_to_preset.*"
                                         r"\.keras.*export_saved_model"):
        writer(encoder, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
