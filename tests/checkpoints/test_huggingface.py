"""Hugging Face directory reader: safetensors, pytorch_model.bin, prefixes, heads, casing."""

import json
import os

import numpy as np
import pytest

from keras_bert_suite.checkpoints import UnsupportedCheckpointError, load_checkpoint
from keras_bert_suite.text import wordpiece_files
from tests.checkpoints.checkpoint_writers import (
    TINY_HF_CONFIG, tiny_hf_tensors, write_hf_dir)



@pytest.mark.real
def test_minilm_config_vocabulary_and_fused_qkv(minilm_checkpoint, minilm_tensors, minilm_dir):
    checkpoint = minilm_checkpoint
    assert checkpoint.format == "huggingface"
    assert checkpoint.config == {
        "vocabulary_size": 30522, "num_layers": 6, "num_heads": 12, "hidden_dim": 384,
        "intermediate_dim": 1536, "max_sequence_length": 512, "num_segments": 2,
        "dropout": 0.1, "layer_norm_epsilon": 1e-12, "initializer_range": 0.02,
        "embedding_dim": None, "position_offset": 0, "activation": "gelu",
        "pooler_activation": "tanh", "num_layer_groups": None, "layers_per_group": 1}
    assert wordpiece_files.lowercase(checkpoint.directory) is True
    assert wordpiece_files.vocabulary_file(checkpoint.directory) == os.path.join(
        minilm_dir, "vocab.txt")
    # [H, 3, N, Dh]: query | key | value, then heads; each transposed from torch's [out, in],
    # whose rows n * Dh ... (n + 1) * Dh are head n.
    qkv = checkpoint.weights["layer_3/attention/qkv/kernel"]
    assert qkv.shape == (384, 3, 12, 32)
    for index, part in enumerate(("query", "key", "value")):
        torch_weight = minilm_tensors[f"encoder.layer.3.attention.self.{part}.weight"]
        np.testing.assert_array_equal(qkv[:, index].reshape(384, 384), torch_weight.T)
        np.testing.assert_array_equal(qkv[:, index, 5], torch_weight[5 * 32:6 * 32].T)
    np.testing.assert_array_equal(
        checkpoint.weights["layer_3/attention/qkv/bias"][1].reshape(384),
        minilm_tensors["encoder.layer.3.attention.self.key.bias"])
    assert not any(name.startswith(("mlm/", "nsp/")) for name in checkpoint.weights)


@pytest.mark.real
def test_pytorch_bin_with_bert_prefix_gamma_beta_and_pretraining_heads(
        tmp_path, minilm_dir, minilm_tensors, minilm_checkpoint):
    """A BertForPreTraining-style pytorch_model.bin, old LayerNorm names, gives the same weights."""
    import torch

    rng = np.random.default_rng(0)
    state = {}
    for name, value in minilm_tensors.items():
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta")
        state[f"bert.{name}"] = torch.from_numpy(value.copy())
    heads = {
        "cls.predictions.transform.dense.weight": rng.normal(size=(384, 384)),
        "cls.predictions.transform.dense.bias": rng.normal(size=(384,)),
        "cls.predictions.transform.LayerNorm.weight": rng.normal(size=(384,)),
        "cls.predictions.transform.LayerNorm.bias": rng.normal(size=(384,)),
        "cls.predictions.bias": rng.normal(size=(30522,)),
        "cls.seq_relationship.weight": rng.normal(size=(2, 384)),
        "cls.seq_relationship.bias": rng.normal(size=(2,)),
    }
    state.update({name: torch.tensor(value, dtype=torch.float32) for name, value in heads.items()})
    torch.save(state, tmp_path / "pytorch_model.bin")
    for file_name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        (tmp_path / file_name).write_bytes(open(os.path.join(minilm_dir, file_name), "rb").read())

    checkpoint = load_checkpoint(tmp_path)

    encoder_names = set(minilm_checkpoint.weights)
    for name in encoder_names:
        np.testing.assert_array_equal(checkpoint.weights[name], minilm_checkpoint.weights[name])
    head = {name: value for name, value in checkpoint.weights.items() if name not in encoder_names}
    assert sorted(head) == sorted([
        "mlm/transform/kernel", "mlm/transform/bias", "mlm/layer_norm/gamma",
        "mlm/layer_norm/beta", "mlm/output_bias", "nsp/kernel", "nsp/bias"])
    as_float = lambda name: heads[name].astype("float32")  # noqa: E731
    np.testing.assert_array_equal(
        head["mlm/transform/kernel"], as_float("cls.predictions.transform.dense.weight").T)
    np.testing.assert_array_equal(head["mlm/output_bias"], as_float("cls.predictions.bias"))
    np.testing.assert_array_equal(head["nsp/kernel"], as_float("cls.seq_relationship.weight").T)
    assert head["nsp/kernel"].shape == (384, 2)


def test_cased_tokenizer_config_and_config_only(tmp_path):
    directory = write_hf_dir(tmp_path, TINY_HF_CONFIG, tiny_hf_tensors(),
                             tokenizer_config={"do_lower_case": False})
    checkpoint = load_checkpoint(directory, load_weights=False)
    assert wordpiece_files.lowercase(checkpoint.directory) is False
    assert checkpoint.weights is None
    assert checkpoint.config["num_layers"] == 2 and checkpoint.config["hidden_dim"] == 8


@pytest.mark.parametrize("change, message", [
    ({"model_type": "gpt2"}, "model_type 'gpt2' is not supported; BertEncoder loads the "
                             "BERT family: bert, roberta, xlm-roberta, distilbert, electra"),
    ({"hidden_act": "relu"}, "hidden_act 'relu' is not supported"),
    ({"hidden_act": "silu"}, "hidden_act 'silu' is not supported"),
    ({"position_embedding_type": "relative_key"},
     "position_embedding_type 'relative_key' is not supported"),
])
def test_unsupported_configs_are_refused(tmp_path, change, message):
    directory = write_hf_dir(tmp_path, {**TINY_HF_CONFIG, **change}, tiny_hf_tensors())
    with pytest.raises(UnsupportedCheckpointError, match=message):
        load_checkpoint(directory)


def test_sharded_safetensors(tmp_path):
    from safetensors.numpy import save_file

    tensors = tiny_hf_tensors()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    for file_name, shard_names in shards.items():
        save_file({name: tensors[name] for name in shard_names}, str(tmp_path / file_name))
    weight_map = {name: file_name for file_name, shard in shards.items() for name in shard}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps(TINY_HF_CONFIG))

    weights = load_checkpoint(tmp_path).weights

    np.testing.assert_array_equal(
        weights["pooler/kernel"], tensors["pooler.dense.weight"].T)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.pop("encoder.layer.1.output.dense.weight"),
     r"has no variable 'encoder.layer.1.output.dense.weight' \(expected shape \(8, 16\)"),
    (lambda t: t.update({"pooler.dense.bias": np.zeros(7, "float32")}),
     r"variable 'pooler.dense.bias' has shape \(7,\) but .*config.json implies \(8,\)"),
    (lambda t: t.update({"encoder.layer.2.output.dense.bias": np.zeros(8, "float32")}),
     r"has variable 'encoder.layer.2.output.dense.bias' of transformer layer 2, but "
     r".*config.json says there are 2 layers"),
])
def test_missing_misshapen_or_extra_tensors_are_named(tmp_path, edit, message):
    from keras_bert_suite.checkpoints import CheckpointMismatchError

    tensors = tiny_hf_tensors()
    edit(tensors)
    directory = write_hf_dir(tmp_path, TINY_HF_CONFIG, tensors)
    with pytest.raises(CheckpointMismatchError, match=message):
        load_checkpoint(directory)
