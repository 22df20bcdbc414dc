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
