"""Fixtures shared by the checkpoint reader tests (the real MiniLM, read once per process)."""

import os

import pytest

from keras_bert_suite.checkpoints import load_checkpoint


@pytest.fixture(scope="session")
def minilm_checkpoint(minilm_dir):
    """The real MiniLM weights read by the Hugging Face reader (the reference for the others)."""
    return load_checkpoint(minilm_dir)


@pytest.fixture(scope="session")
def minilm_tensors(minilm_dir):
    """The MiniLM model.safetensors as {Hugging Face name: numpy array}."""
    from safetensors.numpy import load_file

    return load_file(os.path.join(minilm_dir, "model.safetensors"))


@pytest.fixture(scope="session")
def minilm_garden_dir(tmp_path_factory, minilm_dir):
    """Real MiniLM as a Model Garden v3 release (bert_config.json, bert_model.ckpt.*,
    vocab.txt), written by Model Garden's own converter (~14 s): for the numbers Model
    Garden's encoder computes from it."""
    from keras_bert_suite import BertEncoder
    from tests.checkpoints.checkpoint_writers import write_model_garden_dir

    directory = tmp_path_factory.mktemp("minilm_garden") / "uncased_L-6_H-384_A-12"
    return write_model_garden_dir(directory, BertEncoder.from_preset("minilm_l6_h384_uncased"),
                                  os.path.join(minilm_dir, "vocab.txt"))
