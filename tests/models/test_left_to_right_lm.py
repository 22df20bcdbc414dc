"""The left-to-right LM (GPT-1's objective, the BERT paper's "LTR & No NSP" ablation): a causal
encoder sees no future token, packed instances stay apart, and its next-token loss on real text
is transformers' BertLMHeadModel(is_decoder=True) loss on the same weights (every backend)."""

import numpy as np
import pytest

from keras_bert_suite import BertEncoder, BertPretrainer, save_huggingface
from keras_bert_suite.training.losses import MaskedLMLoss
from tests.conftest import to_numpy
from tests.minilm_reference import reference
from tests.numerics import assert_close

TINY = dict(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=64, dropout=0.0)


@pytest.fixture(scope="module")
def inputs(minilm_dir):
    return reference(minilm_dir)["inputs"]  # 4 rows of real text, padded


def _sequence(encoder, inputs):
    return to_numpy(encoder(inputs)["sequence_output"])


def test_a_future_token_changes_nothing_before_it(inputs):
    causal, bidirectional = BertEncoder(**TINY, causal=True), BertEncoder(**TINY)
    bidirectional.set_weights(causal.get_weights())
    flipped = {**inputs, "token_ids": inputs["token_ids"].copy()}
    flipped["token_ids"][:, 5] = 2023  # "this", at position 5 of every row
    for encoder, sees_ahead in ((causal, False), (bidirectional, True)):
        before, after = _sequence(encoder, inputs), _sequence(encoder, flipped)
        if sees_ahead:
            assert np.abs(before[:, :5] - after[:, :5]).max() > 1e-4
        else:
            np.testing.assert_array_equal(before[:, :5], after[:, :5])
        assert np.abs(before[:, 5] - after[:, 5]).max() > 1e-4  # the token itself changed


def test_packed_instances_do_not_see_each_other_or_the_future():
    encoder = BertEncoder(**{**TINY, "vocabulary_size": 100}, causal=True)
    ids = np.array([[2, 11, 12, 3, 2, 21, 22, 3]], "int32")
    packed = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
              "padding_mask": np.array([[1, 1, 1, 1, 2, 2, 2, 2]], "int32")}
    second_alone = {"token_ids": ids[:, 4:], "segment_ids": np.zeros_like(ids[:, 4:]),
                    "padding_mask": np.ones_like(ids[:, 4:])}
    assert_close(_sequence(encoder, packed)[:, 4:], _sequence(encoder, second_alone),
                 rtol=1e-5, atol=1e-6)


@pytest.mark.real
def test_next_token_loss_is_bert_lm_head_models(tmp_path, inputs):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pretrainer = BertPretrainer(BertEncoder(**TINY, causal=True), next_sentence_prediction=False)
    path = save_huggingface(pretrainer, tmp_path / "hf")
    theirs = transformers.BertLMHeadModel.from_pretrained(path).eval()
    assert theirs.config.is_decoder
    ids, mask = inputs["token_ids"], inputs["padding_mask"]
    labels = np.where(mask > 0, ids, -100)  # transformers shifts them itself
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor(ids, dtype=torch.long),
                          token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
                          attention_mask=torch.tensor(mask, dtype=torch.long),
                          labels=torch.tensor(labels, dtype=torch.long)).loss.item()
    # Ours: predict at every position p the token at p + 1 (a real one only).
    length = ids.shape[1]
    positions = np.tile(np.arange(length - 1, dtype="int32"), (len(ids), 1))
    logits = pretrainer({**inputs, "mask_positions": positions})["mlm_logits"]
    loss = MaskedLMLoss()(ids[:, 1:], logits, sample_weight=(mask[:, 1:] > 0).astype("float32"))
    assert_close(float(to_numpy(loss)), expected, rtol=1e-5, atol=1e-6)
    back = BertPretrainer.from_preset(path)
    assert back.encoder.causal and not back.next_sentence_prediction


def test_the_serving_graph_is_causal_too(inputs):
    """The exported SavedModel's encoder (TensorFlow ops) masks later keys as the model does."""
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the serving graph is TensorFlow's")
    import tensorflow as tf

    from keras_bert_suite.export.serving_encoder import ServingEncoder

    encoder = BertEncoder(**TINY, causal=True)
    served = ServingEncoder(encoder)({k: tf.constant(v) for k, v in inputs.items()})
    real = inputs["padding_mask"] > 0
    expected = _sequence(encoder, inputs)
    assert_close(tf.reshape(served["sequence_output"], expected.shape).numpy()[real],
                 expected[real], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("writer", ["save_google_bert", "save_keras_hub"])
def test_formats_without_a_causal_flag_refuse_a_causal_encoder(tmp_path, writer):
    import keras_bert_suite

    with pytest.raises(ValueError, match="this encoder is causal"):
        getattr(keras_bert_suite, writer)(BertEncoder(**TINY, causal=True), tmp_path / "out")
