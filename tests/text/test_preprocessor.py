"""BertPreprocessor: text (or pairs) -> encoder inputs, in tf.data and eagerly, every backend."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.text import BertPreprocessor
from keras_bert_suite.text import BertTokenizer
from tests.text.conftest import SMALL_VOCABULARY

NAMES = {"token_ids", "segment_ids", "padding_mask"}


@pytest.fixture(scope="module")
def preprocessor(small_tokenizer):
    return BertPreprocessor(small_tokenizer, sequence_length=10)


def tiny_encoder(vocabulary_size):
    return BertEncoder(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=16,
                       intermediate_dim=32, max_sequence_length=16)


def test_tf_data_feeds_encoder_under_current_backend(preprocessor):
    texts = ["the quick brown fox", "lazy dog", "unaffable", "the fox jumps over the lazy dog"]
    labels = [0, 1, 0, 1]
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(2).map(preprocessor)
    features, label = next(iter(dataset))
    assert set(features) == NAMES and label.shape == (2,)
    assert all(isinstance(v, tf.Tensor) and v.dtype == tf.int32 and v.shape == (2, 10)
               for v in features.values())
    encoder = tiny_encoder(len(SMALL_VOCABULARY))
    outputs = encoder.predict(dataset.map(lambda x, y: x), verbose=0)
    assert outputs["sequence_output"].shape == (4, 10, 16)
    assert np.all(np.isfinite(outputs["pooled_output"]))


@pytest.mark.needs_tf_graph
def test_every_pipeline_reuses_one_traced_packing():
    """tf.data traces a map function per pipeline; the tokenizer and packer inside it are one
    cached graph, traced once (not once per pipeline and segment), shared by preprocessors
    with equal configs, and the cached graph gives what eager packing gives. Scalars still
    take the plain path. Counts are compared before and after: a preprocessor of another test
    with the same config may have traced the shared graph already (a SavedModel export
    traces it again)."""
    tokenizer = BertTokenizer(SMALL_VOCABULARY)
    preprocessor = BertPreprocessor(tokenizer, sequence_length=10)
    texts = ["the quick brown fox", "lazy dog", "unaffable", "the fox jumps over the lazy dog"]

    def packed_batch(dataset):
        return {name: value.numpy() for name, value in next(iter(dataset)).items()}

    batches = [packed_batch(tf.data.Dataset.from_tensor_slices(texts).batch(4).map(preprocessor))]
    traced = preprocessor._compiled_functions
    # (the tokenizer's graph is traced inside the packing graph: retracing one retraces both)
    counts = {"pack1": traced["pack1"].experimental_get_tracing_count()}
    pairs = tf.data.Dataset.from_tensor_slices((texts, texts[::-1])).batch(4)
    pair_batch = packed_batch(pairs.map(lambda a, b: preprocessor((a, b))))
    counts["pack2"] = traced["pack2"].experimental_get_tracing_count()
    for _ in range(2):  # new pipelines, and a new preprocessor with the same config
        batches.append(packed_batch(
            tf.data.Dataset.from_tensor_slices(texts).batch(4).map(preprocessor)))
        packed_batch(pairs.map(lambda a, b: preprocessor((a, b))))
    again = BertPreprocessor(BertTokenizer(SMALL_VOCABULARY), sequence_length=10)
    batches.append(packed_batch(tf.data.Dataset.from_tensor_slices(texts).batch(4).map(again)))
    assert again._compiled_functions["pack1"] is traced["pack1"]
    assert {"pack1": traced["pack1"].experimental_get_tracing_count(),
            "pack2": traced["pack2"].experimental_get_tracing_count()} == counts
    other = BertPreprocessor(BertTokenizer(SMALL_VOCABULARY), sequence_length=12)
    other(texts)
    assert other._compiled_functions["pack1"] is not traced["pack1"]  # another config
    eager = preprocessor(texts)
    for batch in batches:
        assert all(np.array_equal(batch[name], eager[name]) for name in NAMES)
    eager_pairs = preprocessor((texts, texts[::-1]))
    assert all(np.array_equal(pair_batch[name], eager_pairs[name]) for name in NAMES)
    single = tf.data.Dataset.from_tensor_slices(texts).map(preprocessor)  # scalars, unbatched
    assert next(iter(single))["token_ids"].numpy().tolist() == eager["token_ids"][0].tolist()


def test_eager_python_lists_give_numpy_for_any_backend(preprocessor):
    features = preprocessor(["the fox", "dog"])
    assert all(isinstance(v, np.ndarray) and v.dtype == np.int32 for v in features.values())
    np.testing.assert_array_equal(features["token_ids"][0], [2, 5, 8, 3, 0, 0, 0, 0, 0, 0])
    outputs = tiny_encoder(len(SMALL_VOCABULARY))(features)
    assert keras.ops.convert_to_numpy(outputs["sequence_output"]).shape == (2, 10, 16)


@pytest.mark.needs_tf_graph
def test_eager_calls_skip_graph_optimizations_and_restore_them(preprocessor):
    """An eager call instantiates the cached graph without Grappler (it runs once), and leaves
    the process' optimizer options as it found them, also when the call fails."""
    seen = []
    original = preprocessor._compiled_functions.get("pack1")
    packed = preprocessor(["the fox"])  # makes the cached graph
    graph = preprocessor._compiled_functions["pack1"]

    class Spy:
        def __call__(self, *args):
            seen.append(tf.config.optimizer.get_experimental_options())
            return graph(*args)

    preprocessor._compiled_functions["pack1"] = Spy()
    try:
        again = preprocessor(["the fox"])
        assert len(seen) == 1 and seen[0]["disable_meta_optimizer"] is True
        assert not tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")
        np.testing.assert_array_equal(again["token_ids"], packed["token_ids"])
        preprocessor._compiled_functions["pack1"] = lambda *args: 1 / 0
        with pytest.raises(ZeroDivisionError):
            preprocessor(["the fox"])
        assert not tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")
    finally:
        preprocessor._compiled_functions["pack1"] = original or graph


@pytest.mark.needs_tf_graph
def test_pairs_and_labels(preprocessor):
    x, y = preprocessor((["the fox", "a"], ["lazy dog jumps", "b"]), [1, 0])
    np.testing.assert_array_equal(x["token_ids"], [
        [2, 5, 8, 3, 13, 14, 9, 10, 3, 0], [2, 25, 3, 1, 3, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(x["segment_ids"], [
        [0, 0, 0, 0, 1, 1, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0, 0, 0]])
    assert y == [1, 0]
    scalar = preprocessor("the fox")
    assert scalar["token_ids"].shape == (10,)
    unlabelled_pairs = tf.data.Dataset.from_tensor_slices((["the fox"], ["dog"])).map(
        lambda a, b: preprocessor((a, b)))
    np.testing.assert_array_equal(next(iter(unlabelled_pairs))["token_ids"],
                                  [2, 5, 8, 3, 14, 3, 0, 0, 0, 0])


@pytest.mark.needs_tf_graph
@pytest.mark.real
def test_pairs_match_transformers_longest_first(minilm_dir, sotu_sentences):
    import transformers

    reference = transformers.BertTokenizer.from_pretrained(minilm_dir)
    preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=48,
                                                truncate="longest_first")
    first, second = sotu_sentences[:200], sotu_sentences[200:400]
    ours = preprocessor((first, second))
    expected = reference(first, second, truncation="longest_first", max_length=48,
                         padding="max_length", return_tensors="np")
    np.testing.assert_array_equal(ours["token_ids"], expected["input_ids"])
    np.testing.assert_array_equal(ours["segment_ids"], expected["token_type_ids"])
    np.testing.assert_array_equal(ours["padding_mask"], expected["attention_mask"])


@pytest.mark.needs_tf_graph
def test_bad_arguments(small_tokenizer):
    with pytest.raises(ValueError, match="must be a BertTokenizer"):
        BertPreprocessor("vocab.txt")
    with pytest.raises(ValueError, match=r"no \[SEP\] token"):
        BertPreprocessor(BertTokenizer(["[UNK]", "[CLS]", "[PAD]", "a"]))
    with pytest.raises(ValueError, match="too small"):
        BertPreprocessor(small_tokenizer, sequence_length=2)
    preprocessor = BertPreprocessor(small_tokenizer, sequence_length=8)
    with pytest.raises(ValueError, match="one text or a pair"):
        preprocessor((["a"], ["b"], ["c"]))
    with pytest.raises(ValueError, match="must be str"):
        preprocessor([1, 2])


def test_keras_round_trip(small_tokenizer, tmp_path):
    preprocessor = BertPreprocessor(small_tokenizer, sequence_length=12, truncate="longest_first")
    path = str(tmp_path / "preprocessor.keras")
    keras.saving.save_model(preprocessor, path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertPreprocessor) and isinstance(restored.tokenizer, BertTokenizer)
    assert restored.sequence_length == 12 and restored.truncate == "longest_first"
    assert restored.tokenizer.get_config() == small_tokenizer.get_config()
    texts = (["The quick brown fox jumps over the lazy dog"], ["unaffable dog"])
    packed = restored(texts)
    for name, value in preprocessor(texts).items():
        np.testing.assert_array_equal(packed[name], value)


@pytest.mark.needs_tf_graph
@pytest.mark.real
def test_from_preset():
    preprocessor = BertPreprocessor.from_preset("bert_tiny_uncased", sequence_length=12)
    assert preprocessor.tokenizer.vocabulary_size() == 30522
    out = preprocessor(["Hello there, General Kenobi!"])
    np.testing.assert_array_equal(out["token_ids"][0, :4], [101, 7592, 2045, 1010])
    with pytest.raises(ValueError, match="pass vocabulary="):
        BertPreprocessor.from_preset("bert_base_cased")
