"""The built-in preset table and the error a name that is neither a preset nor a path gets."""

import pytest

from keras_bert_suite import BertEncoder, BertTokenizer
from keras_bert_suite.checkpoints import UnknownCheckpointFormatError, UnknownPresetError
from keras_bert_suite.presets import PRESETS, list_presets, resolve_checkpoint

FORMATS = ("keras_bert_suite preset directory", "Hugging Face BERT-family directory",
           "original Google BERT checkpoint", "KerasHub BERT-family preset")


def test_misspelled_name_names_the_closest_preset_and_lists_them_all():
    with pytest.raises(UnknownPresetError) as error:
        BertEncoder.from_preset("minilm_l6_h384")

    message = str(error.value)
    assert "'minilm_l6_h384' is neither a built-in preset nor an existing path." in message
    assert "Did you mean the built-in preset 'minilm_l6_h384_uncased'?" in message
    assert all(name in message for name in PRESETS)
    assert all(fmt in message for fmt in FORMATS)


def test_missing_directory_says_which_formats_were_looked_for(tmp_path):
    missing = tmp_path / "no_such_checkpoint"
    with pytest.raises(UnknownPresetError) as error:
        resolve_checkpoint(str(missing))

    message = str(error.value)
    assert f"'{missing}' is neither a built-in preset nor an existing path." in message
    assert "Did you mean" not in message
    for expected in FORMATS + ("config.json", "model.safetensors", "bert_config.json"):
        assert expected in message


def test_tokenizer_gets_the_same_error_and_callers_catching_the_older_type_still_do():
    with pytest.raises(UnknownCheckpointFormatError, match="'bert_base_uncased'"):
        BertTokenizer.from_preset("bert_base_uncase")
    assert issubclass(UnknownPresetError, ValueError)


def test_builtin_name_is_an_architecture_and_every_preset_is_listed():
    checkpoint = resolve_checkpoint("bert_tiny_uncased", load_weights=False)
    assert checkpoint.format == "builtin" and checkpoint.weights is None
    assert checkpoint.config["num_layers"] == 2 and checkpoint.config["hidden_dim"] == 128
    assert set(list_presets()) == set(PRESETS)
