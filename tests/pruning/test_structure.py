"""Structured pruning of a real MiniLM classifier (tests/pruning/conftest.py): the pruned
model computes what the unpruned one computes with those heads and neurons masked, is smaller
by exactly the removed weights, and exports like any model. A tiny pruned classifier goes through the shared harness (config, training, .keras
and quantization round trips) and a task / encoder preset round trip."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_suite import BertClassifier, BertEncoder, BertPreprocessor, BertTokenizer
from keras_bert_suite.pruning import mask_units, prune_ffn, prune_heads, prune_units
from tests.conftest import alternating_reviews, to_numpy
from tests.harness import run_task_test
from tests.numerics import assert_close

from tests.pruning.conftest import PRESET

LAYERS, HIDDEN, HEADS, FFN = 6, 384, 12, 1536
HEAD = HIDDEN // HEADS  # 32
HEADS_TO_REMOVE = {0: [1, 5], 3: [0, 2, 11], 5: list(range(11))}  # layer 5 keeps head 11
NEURONS_TO_REMOVE = {1: list(range(0, FFN, 3)), 2: list(range(1, FFN)), 5: [7]}
# Pruned vs masked: the same float32 sums without the zero terms (other kernels, another
# summation order, over six layers); hidden values are O(1), so atol 1e-5 is ~100 ULPs near
# 0. PyTorch's kernels on an AMD Zen 5 machine differed by 2.2e-5 relative at one of 196,608
# positions (rtol 1e-5 failed there); a wrong head or neuron removed moves outputs by ~1e-1.
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def pruned(classifier):
    return prune_units(classifier, HEADS_TO_REMOVE, NEURONS_TO_REMOVE)


@pytest.mark.real
def test_pruned_model_computes_what_the_masked_model_computes(classifier, pruned, inputs):
    masked = mask_units(classifier, HEADS_TO_REMOVE, NEURONS_TO_REMOVE)
    assert masked.count_params() == classifier.count_params()  # same sizes, zeroed weights
    masked_logits = to_numpy(masked(inputs))
    assert_close(to_numpy(pruned(inputs)), masked_logits, RTOL, ATOL)
    pruned_outputs, masked_outputs = pruned.encoder(inputs), masked.encoder(inputs)
    for output in ("sequence_output", "pooled_output"):
        assert_close(to_numpy(pruned_outputs[output]), to_numpy(masked_outputs[output]),
                     RTOL, ATOL, err_msg=output)
    # ... and masking did change the function (so the comparison above means something).
    assert not np.allclose(masked_logits, to_numpy(classifier(inputs)), atol=1e-4)


@pytest.mark.real
def test_pruned_config_sizes_and_exact_parameter_counts(classifier, pruned):
    assert type(pruned) is BertClassifier
    encoder = pruned.encoder
    assert encoder.layer_num_heads == [10, 12, 12, 9, 12, 1]
    assert encoder.layer_intermediate_dims == [FFN, FFN - 512, 1, FFN, FFN, FFN - 1]
    assert encoder.num_heads == HEADS  # the unpruned count: the head size stays 384 / 12
    assert tuple(encoder.transformer_layers[5].attention.qkv.kernel.shape) == (HIDDEN, 3, 1,
                                                                              HEAD)
    assert tuple(encoder.transformer_layers[3].attention.output_dense.kernel.shape) == (
        9 * HEAD, HIDDEN)
    per_head = HIDDEN * 3 * HEAD + 3 * HEAD + HEAD * HIDDEN  # 49,248
    per_neuron = HIDDEN + 1 + HIDDEN  # 769
    removed = 16 * per_head + (512 + 1535 + 1) * per_neuron
    assert classifier.count_params() - pruned.count_params() == removed == 2_362_880
    assert classifier.count_params() == 22_713_986
    assert pruned.count_params() == 20_351_106
    # The task keeps its head, label names and preprocessor.
    assert pruned.label_names == ["rotten", "fresh"]
    assert pruned.preprocessor is classifier.preprocessor
    np.testing.assert_array_equal(to_numpy(pruned.classifier_head.kernel),
                                  to_numpy(classifier.classifier_head.kernel))


@pytest.mark.real
def test_an_unpruned_preset_keeps_format_version_2(tmp_path):
    encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    encoder.save_preset(str(tmp_path / "plain"))
    with open(tmp_path / "plain" / "config.json") as f:
        saved = json.load(f)
    assert saved["format_version"] == 2
    assert "layer_num_heads" not in saved["config"]


@pytest.mark.needs_savedmodel
@pytest.mark.real
def test_exported_pruned_classifier_answers_raw_text(pruned, reviews, tmp_path):
    import tensorflow as tf

    from keras_bert_suite.export import export_saved_model

    from keras_bert_suite.export import unservable_ops
    from tests.export.conftest import AWKWARD_TEXTS, run_on_serving_host

    texts = np.array([t.encode() for t in reviews[0][:4]] + AWKWARD_TEXTS, dtype=object)
    directory = export_saved_model(pruned, str(tmp_path / "saved_models"), name="pruned",
                                   warmup=False)
    assert unservable_ops(directory) == {}
    # Served from a fresh process with only tensorflow + tensorflow_text, hostile strings too.
    results, leaked = run_on_serving_host(
        [{"export": directory, "signature": "serving_default", "inputs": {"text": texts}}],
        str(tmp_path))
    assert not leaked and "error" not in results[0], results[0]
    expected = pruned.predict([t.decode("utf-8", "replace") for t in texts], verbose=0)
    # Served graph vs eager Keras: oneDNN picks other kernels per shape and CPU (as in
    # tests/export): a relative 1e-4.
    assert_close(results[0]["logits"], expected, 1e-4, 1e-5)
    qkv = [shape for name, shape in tf.train.list_variables(
        os.path.join(directory, "variables", "variables")) if shape[:2] == [HIDDEN, 3]]
    assert sorted(shape[2] for shape in qkv) == [1, 9, 10, 12, 12, 12]


# === The shared harness, on a tiny pruned classifier over the real vocabulary ===

TINY_PRESET = "bert_uncased_L-2_H-128_A-2"


def _tiny_pruned_classifier():
    tokenizer = BertTokenizer.from_preset(TINY_PRESET)
    encoder = BertEncoder(vocabulary_size=30522, num_layers=2, num_heads=4, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=64)
    classifier = BertClassifier(encoder, num_classes=2, label_names=["rotten", "fresh"],
                                preprocessor=BertPreprocessor(tokenizer, sequence_length=16))
    return prune_units(classifier, {0: [0, 3], 1: [1]}, {0: [5], 1: list(range(20))})


@pytest.mark.real
def test_tiny_pruned_classifier_through_the_harness(tmp_path):
    texts, labels = alternating_reviews(per_class=4)
    classifier = _tiny_pruned_classifier()
    assert classifier.encoder.layer_num_heads == [2, 3]
    assert classifier.encoder.layer_intermediate_dims == [31, 12]
    run_task_test(classifier, (texts, labels), raw_predict_input=texts[:3],
                  expected_output_shape=(8, 2), tmp_path=tmp_path / "keras")

    # The task preset (run_task_test quantized its restored copy; `classifier` is float).
    inputs = {name: to_numpy(value) for name, value in classifier.preprocessor(texts).items()}
    expected = to_numpy(classifier(inputs))
    directory = classifier.save_to_preset(str(tmp_path / "preset"))
    with open(os.path.join(directory, "config.json")) as f:
        saved = json.load(f)
    assert saved["format_version"] == 3
    assert saved["config"]["layer_intermediate_dims"] == [31, 12]
    task = BertClassifier.from_preset(directory)
    assert type(task) is BertClassifier and task.label_names == ["rotten", "fresh"]
    config, task_config = classifier.get_config(), task.get_config()
    config.pop("name"), task_config.pop("name")  # a preset stores no object names
    assert json.dumps(task_config, sort_keys=True, default=str) == json.dumps(
        config, sort_keys=True, default=str)
    assert json.dumps(task.preprocessor.get_config(), sort_keys=True) == json.dumps(
        classifier.preprocessor.get_config(), sort_keys=True)
    assert_close(to_numpy(task(inputs)), expected)
    encoder = BertEncoder.from_preset(directory)  # the encoder preset beside the task
    assert encoder.layer_num_heads == [2, 3]
    assert_close(to_numpy(encoder(inputs)["pooled_output"]),
                 to_numpy(classifier.encoder(inputs)["pooled_output"]))
    # A new head on the same encoder (the preprocessor given: the preset's is compared above).
    fresh_head = BertClassifier.from_preset(directory, num_classes=3,
                                            preprocessor=classifier.preprocessor)
    assert fresh_head.encoder.layer_intermediate_dims == [31, 12]
    assert tuple(fresh_head(inputs).shape) == (8, 3)


@pytest.fixture(scope="module")
def minilm_sized_encoder():
    """MiniLM's unit counts (6 layers of 12 heads and 1536 neurons), narrow: only the counts
    matter to these checks."""
    return BertEncoder(vocabulary_size=100, num_layers=LAYERS, num_heads=HEADS, hidden_dim=24,
                       intermediate_dim=FFN, max_sequence_length=16)


@pytest.mark.parametrize("call, message", [
    (lambda m: prune_heads(m, {6: [0]}), r"heads_to_remove: layer 6 is out of range; the "
                                         r"encoder has 6 layers \(0 to 5\)"),
    (lambda m: prune_heads(m, {2: [12]}), r"heads_to_remove\[2\]: head 12 is out of range; "
                                          r"layer 2 has 12 heads \(0 to 11\)"),
    (lambda m: prune_heads(m, {2: [-1]}), r"head -1 is out of range"),
    (lambda m: prune_heads(m, {1: range(12)}), r"heads_to_remove\[1\] removes all 12 heads of "
                                               r"layer 1; every layer keeps at least one "
                                               r"\(remove at most 11\)"),
    (lambda m: prune_heads(m, [0, 1]), r"heads_to_remove must be a dict \{layer index: "
                                       r"\[head indices\]\}"),
    (lambda m: prune_heads(m, {0: 3}), r"heads_to_remove\[0\] must be a list of head indices"),
    (lambda m: prune_ffn(m, {0: [1536]}), r"neurons_to_remove\[0\]: neuron 1536 is out of "
                                          r"range; layer 0 has 1536 neurons"),
    (lambda m: prune_ffn(m, {"0": [1]}), r"neurons_to_remove: layer '0' is out of range"),
    (lambda m: mask_units(m, heads_to_mask={0: [99]}), r"heads_to_mask\[0\]: head 99"),
    (lambda m: prune_heads(keras.Sequential(), {0: [0]}),
     r"Pruning takes a BertEncoder or one of our task models"),
])
def test_bad_units_are_clear_errors(call, message, minilm_sized_encoder):
    with pytest.raises(ValueError, match=message):
        call(minilm_sized_encoder)


def _tiny_classifier():
    encoder = BertEncoder(vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=16)
    return BertClassifier(encoder, num_classes=3)


def _tiny_inputs():
    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(0, 100, (3, 8)).astype("int32"),
            "segment_ids": np.zeros((3, 8), "int32"), "padding_mask": np.ones((3, 8), "int32")}


def test_pruning_twice_indexes_the_current_heads():
    classifier, inputs = _tiny_classifier(), _tiny_inputs()
    # After the first call layer 0 has the original heads 0, 2, 3: its current head 1 is
    # original head 2.
    first = prune_units(classifier, {0: [1]}, {1: [0, 1]})
    twice = prune_ffn(prune_heads(first, {0: [1]}), {1: [0]})  # neuron 0 is now original 2
    once = prune_units(classifier, {0: [1, 2]}, {1: [0, 1, 2]})
    assert twice.encoder.layer_num_heads == once.encoder.layer_num_heads == [2, 4]
    assert twice.encoder.layer_intermediate_dims == [32, 29]
    assert_close(to_numpy(twice(inputs)), to_numpy(once(inputs)), RTOL, ATOL)
    # Removing nothing is a copy with the unpruned config.
    copy = prune_units(classifier)
    assert copy.encoder.layer_num_heads is None and not copy.encoder.is_pruned
    assert_close(to_numpy(copy(inputs)), to_numpy(classifier(inputs)))


def test_pruning_a_lora_model_merges_its_adapters():
    classifier, inputs = _tiny_classifier(), _tiny_inputs()
    classifier.enable_lora(2)
    layer = classifier.encoder.transformer_layers[0].intermediate_dense
    layer.lora_kernel_b.assign(np.full(layer.lora_kernel_b.shape, 0.1, "float32"))
    smaller = prune_heads(classifier, {0: [0]})
    assert smaller.encoder.lora_rank is None
    assert not any("lora" in variable.path for variable in smaller.weights)
    expected = mask_units(classifier, heads_to_mask={0: [0]})
    assert_close(to_numpy(smaller(inputs)), to_numpy(expected(inputs)), RTOL, ATOL)
    smaller.enable_lora(2)  # adapters again, on the pruned sizes
    assert smaller.encoder.lora_rank == 2
