"""The text graph is servable: only core TF ops plus the tf-text ops TF Serving >= 2.12 links,
and a SavedModel with a raw-string signature reloads with identical outputs."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.text import BertPreprocessor
from tests.text.conftest import SMALL_VOCABULARY


SERVABLE_TF_TEXT_OPS = {
    "NormalizeUTF8", "CaseFoldUTF8", "RegexSplitWithOffsets", "WordpieceTokenizeWithOffsets",
    "FastWordpieceTokenizeWithOffsets", "FastBertNormalize",
}


def graph_ops(concrete_function):
    graph_def = concrete_function.graph.as_graph_def()
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:  # tf.cond branches
        ops |= {node.op for node in function.node_def}
    return ops


@pytest.mark.needs_tf_graph
def test_only_servable_ops():
    from keras_bert_suite.text import BertTokenizer

    tokenizer = BertTokenizer(SMALL_VOCABULARY)  # uncased: the cased graph is a subset
    preprocessor = BertPreprocessor(tokenizer, sequence_length=16)

    def everything(a, b):
        ids, starts, ends = tokenizer.tokenize_with_offsets(a)
        return preprocessor((a, b)), starts.values, ends.values, tokenizer.detokenize(ids)

    spec = tf.TensorSpec([None], tf.string)
    ops = graph_ops(tf.function(everything, autograph=False).get_concrete_function(spec, spec))
    not_core = {op for op in ops if not hasattr(tf.raw_ops, op)}
    assert not_core <= SERVABLE_TF_TEXT_OPS, not_core - SERVABLE_TF_TEXT_OPS
    assert "FastWordpieceTokenizeWithOffsets" in not_core
    assert not ops & {"PyFunc", "EagerPyFunc", "XlaCallModule"}
    assert not any("RoundRobin" in op for op in ops)


@pytest.mark.needs_savedmodel
def test_saved_model_round_trip(small_tokenizer, tmp_path):
    preprocessor = BertPreprocessor(small_tokenizer, sequence_length=12)
    module = tf.Module()
    module.preprocessor = preprocessor
    module.serve = tf.function(
        lambda text: preprocessor(text), input_signature=[tf.TensorSpec([None], tf.string)])
    path = str(tmp_path / "saved_model")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    restored = tf.saved_model.load(path)
    # A word of 101 characters is one [UNK] (transformers' limit), one of 100 is pieces.
    texts = tf.constant(["The quick brown fox!", "", b"caf\xc3 \xff dog", "ab" + "b" * 99,
                         "ab" + "b" * 98])
    expected = preprocessor(texts)
    got = restored.signatures["serving_default"](text=texts)
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(got[name].numpy(), expected[name])
    unknown, a, b = (small_tokenizer.get_vocabulary().index(t) for t in ("[UNK]", "a", "##b"))
    assert list(got["token_ids"].numpy()[3, 1:3]) == [unknown, small_tokenizer.sep_token_id]
    assert list(got["token_ids"].numpy()[4, 1:4]) == [a, b, b]
