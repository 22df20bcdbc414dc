"""LoRA on every task model, every backend: only the adapters and the head train, the adapters
travel in `.keras` files and task presets, and exports hold the merged kernels. MiniLM's
architecture for what LoRA adds to it (the README's parameter counts); the trained model
whose adapters travel and merge is a 2-layer, 128-wide BERT (the same code on a smaller
model: MiniLM's training step cost more than every check here)."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier, BertEncoder, BertSpanLabeler, BertTokenClassifier, save_huggingface)
from keras_bert_suite.layers.lora_dense import stored_kernel
from keras_bert_suite.models.lora import parameter_count
from keras_bert_suite.transforms import without_lora
from tests.conftest import alternating_reviews, to_numpy
from tests.numerics import assert_close

pytestmark = pytest.mark.real
PRESET = "minilm_l6_h384_uncased"
SMALL = "bert_uncased_L-2_H-128_A-2"
RANK = 4


def _values(model):
    return {variable.path: to_numpy(variable) for variable in model.weights}


def _trained_lora_classifier():
    """A small BERT classifier with rank-4 adapters after one epoch on real reviews."""
    keras.utils.set_random_seed(0)
    classifier = BertClassifier.from_preset(SMALL, load_weights=False, num_classes=2,
                                            sequence_length=32, label_names=["rotten", "fresh"],
                                            lora_rank=RANK)
    texts, labels = alternating_reviews(per_class=8)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = _values(classifier)
    classifier.fit(texts, np.array(labels), epochs=1, batch_size=8, verbose=0)
    return classifier, before, texts


@pytest.fixture(scope="module")
def trained():
    return _trained_lora_classifier()


def test_enabling_lora_keeps_the_function_and_freezes_the_encoder():
    small = BertClassifier.from_preset(SMALL, load_weights=False, num_classes=3,
                                       sequence_length=16)
    inputs = small.preprocessor(["A gripping drama.", "Dull."])
    expected = to_numpy(small(inputs))
    small.enable_lora(8)
    np.testing.assert_array_equal(to_numpy(small(inputs)), expected)  # B starts at 0
    # What LoRA trains on MiniLM (the README's count).
    classifier = BertClassifier.from_preset(PRESET, load_weights=False, num_classes=3,
                                            sequence_length=16)
    classifier.enable_lora(8)
    hidden, intermediate, layers = 384, 1536, 6
    adapters = layers * 8 * ((hidden + 3 * hidden) + 2 * hidden + 2 * (hidden + intermediate))
    head = hidden * 3 + 3
    assert parameter_count(classifier.trainable_weights) == adapters + head
    assert parameter_count(classifier.trainable_weights) / parameter_count(
        classifier.weights) < 0.015
    assert {variable.path.rsplit("/", 1)[-1] for variable in classifier.trainable_weights} == {
        "lora_kernel_a", "lora_kernel_b", "kernel", "bias"}  # the last two: the head's


@pytest.mark.parametrize("task_class, arguments", [
    (BertTokenClassifier, {"num_classes": 5}), (BertSpanLabeler, {})])
def test_every_task_takes_lora_rank(task_class, arguments):
    model = task_class.from_preset(PRESET, sequence_length=16, lora_rank=2, **arguments)
    assert model.encoder.lora_rank == 2
    trained = {variable.path for variable in model.trainable_weights}
    assert all("lora_kernel" in path or path.startswith(("logits/", "span")) for path in trained)


def test_training_changes_only_the_adapters_and_the_head(trained):
    classifier, before, _ = trained
    after = _values(classifier)
    changed = {path for path in after if not np.array_equal(after[path], before[path])}
    adapters_b = {path for path in after if path.endswith("lora_kernel_b")}
    assert adapters_b <= changed  # every B left zero
    assert {path for path in changed if "lora_kernel" not in path} == {
        "logits/kernel", "logits/bias"}


def test_keras_file_round_trip_keeps_the_adapters(trained, tmp_path):
    classifier, _, texts = trained
    path = str(tmp_path / "lora.keras")
    classifier.save(path)
    back = keras.saving.load_model(path)
    assert back.encoder.lora_rank == RANK
    saved, loaded = _values(classifier), _values(back)
    assert sorted(saved) == sorted(loaded)
    for name, value in saved.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)
    inputs = classifier.preprocessor(texts)
    assert_close(to_numpy(back(inputs)), to_numpy(classifier(inputs)))
    assert parameter_count(back.trainable_weights) == parameter_count(
        classifier.trainable_weights)


def test_task_preset_round_trip_keeps_the_adapters(trained, tmp_path):
    classifier, _, texts = trained
    directory = classifier.save_to_preset(tmp_path / "preset")
    back = BertClassifier.from_preset(directory)
    assert back.encoder.lora_rank == RANK
    inputs = classifier.preprocessor(texts)
    assert_close(to_numpy(back(inputs)), to_numpy(classifier(inputs)))
    # The encoder preset beside it holds the merged weights, without adapters.
    with open(os.path.join(directory, "config.json")) as f:
        assert "lora_rank" not in json.load(f)["config"]
    merged_encoder = BertEncoder.from_preset(directory)
    assert merged_encoder.lora_rank is None
    assert_close(to_numpy(merged_encoder(inputs)["pooled_output"]),
                 to_numpy(classifier.encoder(inputs)["pooled_output"]))


def test_merged_copy_and_hugging_face_export_compute_the_same(trained, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    classifier, _, texts = trained
    inputs = classifier.preprocessor(texts)
    expected = to_numpy(classifier(inputs))
    merged = without_lora(classifier)
    assert merged.encoder.lora_rank is None
    assert not any("lora" in variable.path for variable in merged.weights)
    assert_close(to_numpy(merged(inputs)), expected)
    # W + A B differs from W: the adapters did change what the model computes.
    first = classifier.encoder.transformer_layers[0].attention.qkv
    assert not np.allclose(to_numpy(first.kernel), to_numpy(stored_kernel(first)))

    path = save_huggingface(classifier, tmp_path / "hf")
    theirs = transformers.BertForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        logits = theirs(input_ids=torch.tensor(to_numpy(inputs["token_ids"]), dtype=torch.long),
                        token_type_ids=torch.tensor(to_numpy(inputs["segment_ids"]),
                                                    dtype=torch.long),
                        attention_mask=torch.tensor(to_numpy(inputs["padding_mask"]),
                                                    dtype=torch.long)).logits.numpy()
    assert_close(logits, expected, rtol=1e-4, atol=2e-5)


@pytest.mark.needs_savedmodel
def test_saved_model_export_serves_the_merged_kernels(trained, tmp_path):
    import tensorflow as tf

    from keras_bert_suite.export import export_saved_model

    classifier, _, texts = trained
    directory = export_saved_model(classifier, str(tmp_path), name="lora", warmup=False)
    shapes = [shape for name, shape in tf.train.list_variables(
        os.path.join(directory, "variables", "variables")) if name.startswith("weights/")]
    adapters = 2 * 4 * len(classifier.encoder.transformer_layers)  # A, B of 4 projections
    assert len(shapes) == len(classifier.weights) - adapters
    assert not any(RANK in shape for shape in shapes)  # no [in, r] or [r, out] left
    loaded = tf.saved_model.load(directory)
    served = loaded.signatures["serving_default"](tf.constant(texts))
    assert_close(served["logits"].numpy(), to_numpy(classifier.predict(texts, verbose=0)))


def test_bad_ranks_and_misuse_have_clear_errors(tmp_path):
    encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    with pytest.raises(ValueError, match=r"lora_rank=129 is larger than layer "
                                         r"'transformer_layer_0/attention/qkv' \(128 -> 384\)"):
        encoder.enable_lora(129)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="lora_rank must be a positive integer"):
            encoder.enable_lora(bad)
    with pytest.raises(ValueError, match="lora_alpha must be a positive number"):
        encoder.enable_lora(4, alpha=0)
    plain_weights = {name: to_numpy(v) for name, v in encoder.weight_map().items()}
    plain_file = str(tmp_path / "plain.weights.h5")
    encoder.save_weights(plain_file)
    encoder.enable_lora(4)
    with pytest.raises(ValueError, match="LoRA is already enabled on this encoder"):
        encoder.enable_lora(4)
    with pytest.raises(ValueError, match="cannot be loaded while LoRA is enabled"):
        encoder.load_weight_map(plain_weights)
    with pytest.raises(ValueError, match="was saved without LoRA"):
        encoder.load_weights(plain_file)
    assert encoder.lora_rank == 4


def test_recipe_key_trains_with_lora(tmp_path):
    from keras_bert_suite import recipe_runner
    from keras_bert_suite.recipe_runner import load_recipe

    recipe = load_recipe("sentiment_rotten_tomatoes_cpu", [
        "training.lora_rank=4", "model.preset=bert_uncased_L-2_H-128_A-2",
        "model.load_weights=false", "training.num_train_steps=2", "training.batch_size=8",
        "data.max_train_examples=16", "data.max_eval_examples=16", "data.sequence_length=32"])
    summary = recipe_runner.run_recipe(recipe, str(tmp_path / "run"), command="finetune",
                                       verbose=0, log=lambda *_: None)
    model = summary["model"]
    assert model.encoder.lora_rank == 4
    assert summary["metrics"]["trainable_parameters"] == parameter_count(
        model.trainable_weights) < 0.02 * parameter_count(model.weights)
    back = keras.saving.load_model(summary["model_path"])
    assert back.encoder.lora_rank == 4
