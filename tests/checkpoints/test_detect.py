"""Format detection and the error messages a wrong or broken directory gets."""

import pytest

from keras_bert_suite.checkpoints import (
    CheckpointMismatchError, UnknownCheckpointFormatError, load_checkpoint)
from tests.checkpoints.checkpoint_writers import (
    TINY_HF_CONFIG, tiny_hf_tensors, write_hf_dir)



def test_unknown_directory_lists_the_formats_and_their_files(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0")

    with pytest.raises(UnknownCheckpointFormatError) as error:
        load_checkpoint(tmp_path)

    message = str(error.value)
    assert "weights.bin" in message  # says what it found
    for expected in ("keras_bert_suite preset directory", "model.weights.npz",
                     "KerasHub BERT-family preset", "model.weights.h5",
                     "Hugging Face BERT-family directory", "model.safetensors", "pytorch_model.bin",
                     "original Google BERT checkpoint", "bert_config.json",
                     "bert_model.ckpt.index", "TF Model Garden TF2 BERT checkpoint",
                     "object-based TF2 checkpoint"):
        assert expected in message


def test_missing_path_is_reported(tmp_path):
    with pytest.raises(UnknownCheckpointFormatError, match="is not a directory"):
        load_checkpoint(tmp_path / "nowhere")


def test_fewer_layers_than_config_names_the_first_missing_variable(tmp_path):
    tensors = tiny_hf_tensors()  # 2 layers
    directory = write_hf_dir(tmp_path, {**TINY_HF_CONFIG, "num_hidden_layers": 4}, tensors)

    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(directory)

    message = str(error.value)
    assert "no variable 'encoder.layer.2.attention.self.query.weight'" in message
    assert "model.safetensors" in message and "config.json" in message


def test_mis_shaped_weight_names_it_and_both_shapes(tmp_path):
    tensors = tiny_hf_tensors()
    tensors["encoder.layer.1.intermediate.dense.weight"] = tensors[
        "encoder.layer.1.intermediate.dense.weight"][:12]
    directory = write_hf_dir(tmp_path, TINY_HF_CONFIG, tensors)

    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(directory)

    message = str(error.value)
    assert "'encoder.layer.1.intermediate.dense.weight'" in message
    assert "has shape (12, 8)" in message and "implies (16, 8)" in message


def test_config_without_weights_says_which_files_are_missing(tmp_path):
    directory = write_hf_dir(tmp_path, TINY_HF_CONFIG, tiny_hf_tensors())
    (tmp_path / "model.safetensors").unlink()

    assert load_checkpoint(directory, load_weights=False).weights is None
    with pytest.raises(CheckpointMismatchError, match="no weights: expected one of"):
        load_checkpoint(directory)
