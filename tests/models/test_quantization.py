"""`quantize("int8")` beyond the harness (tests/harness.py `run_quantization_test` runs it on
the encoder and every task): what the config records, the mistakes it refuses, and the
checkpoints a quantized model writes. Every backend."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder, save_huggingface
from keras_bert_suite.keras_compat import all_layers
from keras_bert_suite.models.quantization import CONFIG_KEY
from tests.conftest import to_numpy

TINY = dict(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
            max_sequence_length=32)


def test_config_lists_every_quantized_layer_and_rebuilds_them():
    encoder = BertEncoder(**TINY)
    assert CONFIG_KEY not in encoder.get_config()  # float configs read as they always did
    encoder.quantize("int8")
    (group,) = encoder.get_config()[CONFIG_KEY]
    projections = [f"transformer_layer_{i}/{name}" for i in range(2)
                   for name in ("attention/qkv", "attention/output", "intermediate", "output")]
    assert group["mode"] == "int8"
    assert sorted(group["layers"]) == sorted(
        projections + ["embeddings/segment_embedding", "embeddings/token_embedding", "pooler"])
    rebuilt = BertEncoder.from_config(encoder.get_config())
    assert rebuilt.transformer_layers[1].attention.qkv.kernel.dtype == "int8"

    config = encoder.get_config()
    config[CONFIG_KEY][0]["layers"].append("transformer_layer_7/intermediate")
    with pytest.raises(ValueError, match=r"lists quantized layers it does not have: "
                                         r"\['transformer_layer_7/intermediate'\]"):
        BertEncoder.from_config(config)


def test_mistakes_are_refused_before_anything_changes():
    encoder = BertEncoder(**TINY)
    with pytest.raises(ValueError, match="support mode 'int8'"):
        encoder.quantize("int4")
    assert all(layer.quantization_mode is None for layer in all_layers(encoder))

    adapted = BertEncoder(**TINY, lora_rank=2)
    with pytest.raises(ValueError, match="the encoder has LoRA adapters; quantize the merged"):
        adapted.quantize("int8")
    assert all(layer.quantization_mode is None for layer in all_layers(adapted))

    encoder.quantize("int8")
    with pytest.raises(ValueError, match="LoRA on a quantized encoder is not supported"):
        encoder.enable_lora(2)
    weights = {name: to_numpy(value) for name, value in encoder.weight_map().items()}
    with pytest.raises(ValueError, match="cannot be loaded while LoRA is enabled or the model "
                                         "is quantized"):
        encoder.load_weight_map(weights)


def test_checkpoints_of_a_quantized_model_hold_its_dequantized_weights(tmp_path):
    """Out of a quantized model: float weights equal to the int8 values times their scales,
    which a float model loads as they are."""
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**TINY)
    encoder.quantize("int8")
    save_huggingface(encoder, str(tmp_path / "hf"))
    reloaded = BertEncoder.from_preset(str(tmp_path / "hf"))
    assert reloaded.transformer_layers[0].intermediate_dense.quantization_mode is None
    expected = encoder.weight_map()
    for name, value in reloaded.weight_map().items():
        np.testing.assert_array_equal(to_numpy(value), to_numpy(expected[name]), err_msg=name)
    layer = encoder.transformer_layers[0].intermediate_dense  # value / scale, by hand
    np.testing.assert_allclose(
        to_numpy(expected["layer_0/intermediate/kernel"]),
        to_numpy(layer.kernel).astype("float32") / to_numpy(layer.kernel_scale),
        rtol=1e-6)


def test_a_quantized_task_takes_a_new_preprocessor():
    """Keras locks a model's attributes after quantize; ours stay settable, as the export
    and the reload of a task set its preprocessor."""
    from keras_bert_suite import BertClassifier, BertPreprocessor, BertTokenizer

    classifier = BertClassifier(BertEncoder(**{**TINY, "vocabulary_size": 30522}), num_classes=2)
    classifier.quantize("int8")
    tokenizer = BertTokenizer.from_preset("bert_uncased_L-2_H-128_A-2")
    classifier.preprocessor = BertPreprocessor(tokenizer, sequence_length=16)
    assert classifier.predict(["a gripping drama"], verbose=0).shape == (1, 2)


def test_pruning_a_quantized_model_is_refused():
    from keras_bert_suite import pruning

    encoder = BertEncoder(**TINY)
    encoder.quantize("int8")
    with pytest.raises(ValueError, match="Pruning or masking of a quantized BertEncoder is not "
                                         "supported: do it to the float model, then quantize"):
        pruning.prune_units(encoder, heads_to_remove={0: [1]})
