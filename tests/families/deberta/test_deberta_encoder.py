"""DeBERTa-v3 read from a transformers directory computes DebertaV2Model's numbers on real
sentences with padding (every layer's hidden state), on every backend, in a compiled function
that takes two batch sizes; and it goes back out bit for bit (our preset, transformers' files)."""

import numpy as np
import pytest
import keras

from keras_bert_suite import BertEncoder
from tests.conftest import to_numpy
from tests.families.deberta.conftest import padded_inputs
from tests.families.conftest import SENTENCE_PAIRS
from tests.numerics import assert_close

# Ours vs torch: other kernels and summation order; a wrong bucket, scale or epsilon moves
# outputs by 1e-2 or more.
RTOL, ATOL = 1e-4, 1e-5
# 40 tokens: past the 16 distances the buckets reach, so clamped rows are read too.
LENGTH = 40
SENTENCES = [first + " " + second for first, second in SENTENCE_PAIRS] + [
    "The people of this Nation have a right to know what their Government is doing, and "
    "they will hold us to account for every dollar we spend on their behalf."]


def _reference(directory, inputs):
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(directory).eval()
    with torch.no_grad():
        outputs = model(input_ids=torch.from_numpy(inputs["token_ids"]).long(),
                        attention_mask=torch.from_numpy(inputs["padding_mask"]).long(),
                        output_hidden_states=True)
    return np.stack([h.numpy() for h in outputs.hidden_states], axis=1)  # [B, L + 1, T, H]


def _compiled(encoder):
    """The encoder's hidden states as one compiled function of any batch size: jax.jit on
    JAX, tf.function(jit_compile=True) with an unknown batch on TensorFlow; torch eagerly."""
    def hidden_states(inputs):
        return encoder(inputs)["hidden_states"]

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(hidden_states)
    if backend == "tensorflow":
        import tensorflow as tf

        spec = {name: tf.TensorSpec([None, LENGTH], tf.int32)
                for name in ("token_ids", "segment_ids", "padding_mask")}
        return tf.function(hidden_states, jit_compile=True, input_signature=[spec])
    return hidden_states


@pytest.mark.real
def test_hidden_states_are_transformers_in_a_compiled_function(deberta_dir):
    import transformers

    encoder = BertEncoder.from_preset(deberta_dir, return_hidden_states=True)
    assert encoder.block == "deberta" and encoder.block_options == {
        "position_buckets": 8, "max_relative_positions": 16, "pos_att_type": ["p2c", "c2p"]}
    tokenizer = transformers.AutoTokenizer.from_pretrained(deberta_dir)
    inputs = padded_inputs(tokenizer, SENTENCES, LENGTH)
    assert inputs["padding_mask"].sum(axis=1).max() > 16 > inputs["padding_mask"].sum(
        axis=1).min()
    expected = _reference(deberta_dir, inputs)
    real = inputs["padding_mask"].astype(bool)  # transformers' padded rows see no key at all
    compiled = _compiled(encoder)
    for rows in (slice(0, 2), slice(0, 4)):  # two batch sizes through the one function
        batch = {name: value[rows] for name, value in inputs.items()}
        ours = to_numpy(compiled(batch))
        assert_close(ours.transpose(0, 2, 1, 3)[real[rows]],
                     expected[rows].transpose(0, 2, 1, 3)[real[rows]], RTOL, ATOL)


@pytest.mark.real
def test_round_trips_are_bit_for_bit(deberta_dir, tmp_path):
    """Our preset and transformers' files (DebertaV2Model: no missing or unexpected weight,
    every tensor as read) bring back the same weights and configuration."""
    import transformers

    from keras_bert_suite import save_huggingface

    encoder = BertEncoder.from_preset(deberta_dir)
    ours = {name: to_numpy(value) for name, value in encoder.weight_map().items()}
    encoder.save_preset(str(tmp_path / "preset"))
    path = save_huggingface(encoder, tmp_path / "transformers")
    theirs, info = transformers.AutoModel.from_pretrained(path, output_loading_info=True)
    assert type(theirs).__name__ == "DebertaV2Model"
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    original = transformers.AutoModel.from_pretrained(deberta_dir).state_dict()
    for name, value in theirs.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), original[name].numpy(), err_msg=name)
    for directory in (tmp_path / "preset", path):
        back = BertEncoder.from_preset(str(directory))
        assert back.get_config() == {**encoder.get_config(), "name": back.name}
        for name, value in back.weight_map().items():
            if name.startswith("pooler/"):  # DebertaV2Model keeps no pooler
                continue
            np.testing.assert_array_equal(to_numpy(value), ours[name], err_msg=name)


@pytest.mark.parametrize("setting, value", [
    ("conv_kernel_size", 3), ("relative_attention", False), ("share_att_key", False),
    ("norm_rel_ebd", "none"), ("position_biased_input", True), ("embedding_size", 16)])
def test_deberta_v2_only_settings_are_refused_by_name(setting, value):
    from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
    from keras_bert_suite.families.deberta import encoder_config
    from tests.families.deberta.conftest import CONFIG

    hf_json = {**CONFIG, "model_type": "deberta-v2", setting: value}
    with pytest.raises(UnsupportedCheckpointError, match=setting):
        encoder_config(hf_json, "config.json")


def test_harness_lora_and_pruning_reach_the_kind(tmp_path):
    """The shared harness on a tiny DeBERTa encoder, LoRA adapters (saved and loaded with the file) and pruning (a
    removed head, whose query and key also project the relative embeddings, is exactly a
    masked one): the transforms reach DeBERTa's blocks and its relative embeddings through
    the declarations (int8 reads the same BERT tables)."""
    from keras_bert_suite import BertClassifier, pruning
    from tests.harness import run_layer_test, run_model_saving_test

    arguments = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8,
                     intermediate_dim=16, num_segments=0, block="deberta",
                     block_options={"position_buckets": 4, "max_relative_positions": 8,
                                    "pos_att_type": ["c2p"]})
    inputs = {"token_ids": np.array([[2, 5, 7, 9, 3, 0], [2, 4, 4, 3, 0, 0]], "int32"),
              "segment_ids": np.zeros((2, 6), "int32"),
              "padding_mask": np.array([[1] * 5 + [0], [1] * 4 + [0, 0]], "int32")}
    # The harness: arguments, config and `.keras` round trips, shapes, a training step.
    encoder, _ = run_layer_test(BertEncoder, arguments, inputs,
                                {"sequence_output": (2, 6, 8), "pooled_output": (2, 8)},
                                tmp_path=tmp_path / "harness")
    assert len(encoder.weights) == len(encoder.weight_map())  # every weight is in the table
    classifier = BertClassifier(encoder, num_classes=2, dropout=0.0)
    masked = pruning.mask_units(classifier, heads_to_mask={0: [1]}, neurons_to_mask={1: [3]})
    smaller = pruning.prune_units(classifier, heads_to_remove={0: [1]},
                                  neurons_to_remove={1: [3]})
    assert smaller.encoder.layer_num_heads == [1, 2]
    assert_close(to_numpy(smaller(inputs)), to_numpy(masked(inputs)))
    encoder.enable_lora(2)
    run_model_saving_test(encoder, inputs, tmp_path=tmp_path / "lora")
