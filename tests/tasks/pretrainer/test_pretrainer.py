"""BertPretrainer on the current Keras backend (tiny configurations)."""

import logging
import zipfile

import h5py
import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder, BertPretrainer
from keras_bert_suite.training import create_optimizer
from tests.conftest import to_numpy
from tests.numerics import assert_close
from tests.tiny_pretraining import (
    RUN_EAGERLY,
    TINY,
    VOCABULARY_SIZE,
    pretraining_batch,
    tiny_pretrainer,
)


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_outputs_and_mlm_only():
    x, _ = pretraining_batch()
    outputs = tiny_pretrainer()(x)
    assert tuple(outputs["mlm_logits"].shape) == (4, 3, VOCABULARY_SIZE)  # [B, P, V]
    assert tuple(outputs["nsp_logits"].shape) == (4, 2)
    mlm_only = tiny_pretrainer(next_sentence_prediction=False)
    assert set(mlm_only(x)) == {"mlm_logits"}
    assert not any(name.startswith("nsp/") for name in mlm_only.weight_map())


def test_tied_decoder_shares_the_embedding_variable():
    pretrainer = tiny_pretrainer()
    encoder = pretrainer.encoder
    assert pretrainer.masked_lm_head.token_embedding is encoder.token_embedding
    # Encoder + MLM head (transform 2, layer norm 2, output bias 1) + NSP dense (2): the
    # [V, H] matrix is counted once.
    assert len(pretrainer.weights) == len(encoder.weights) + 5 + 2
    assert sum(tuple(w.shape) == (VOCABULARY_SIZE, TINY["hidden_dim"])
               for w in pretrainer.weights) == 1


def test_fit_lowers_the_mlm_loss():
    pretrainer = tiny_pretrainer(num_layers=1)  # compiled fits cost seconds per layer on JAX
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-2))
    x, y = pretraining_batch()
    history = pretrainer.fit(x, y, batch_size=4, epochs=8, verbose=0).history
    mlm_loss = history["mlm_logits_loss"]
    assert mlm_loss[-1] < mlm_loss[0] - 0.3, mlm_loss
    assert history["mlm_logits_accuracy"][-1] > history["mlm_logits_accuracy"][0]
    assert set(history) >= {"loss", "mlm_logits_perplexity", "nsp_logits_loss",
                            "nsp_logits_accuracy"}


def test_padded_prediction_slots_do_not_count():
    """Loss and metrics equal a hand computation over the real slots only, and do not move
    when the padded slots get other positions and labels."""
    pretrainer = tiny_pretrainer()
    pretrainer.compile(run_eagerly=RUN_EAGERLY)
    x, y = pretraining_batch()
    results = pretrainer.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)

    logits = to_numpy(pretrainer(x)["mlm_logits"])  # [B, P, V]
    real = y["mlm_weights"] > 0
    log_probs = np.take_along_axis(_log_softmax(logits), y["mlm_labels"][..., None], -1)[..., 0]
    cross_entropy = -log_probs[real].mean()
    accuracy = (logits.argmax(-1) == y["mlm_labels"])[real].mean()
    nsp_logits = to_numpy(pretrainer(x)["nsp_logits"])
    nsp_loss = -_log_softmax(nsp_logits)[np.arange(4), y["nsp_labels"]].mean()
    np.testing.assert_allclose(results["mlm_logits_loss"], cross_entropy, rtol=1e-5)
    np.testing.assert_allclose(results["mlm_logits_accuracy"], accuracy, rtol=1e-6)
    np.testing.assert_allclose(results["mlm_logits_perplexity"], np.exp(cross_entropy),
                               rtol=1e-5)
    np.testing.assert_allclose(results["loss"], cross_entropy + nsp_loss, rtol=1e-5)

    x2, y2 = dict(x), dict(y)
    x2["mask_positions"] = np.where(real, x["mask_positions"], 5).astype("int32")
    y2["mlm_labels"] = np.where(real, y["mlm_labels"], 7).astype("int32")
    # The same weights given the tf.data way, as sample_weight, give the same numbers too.
    weights = y2.pop("mlm_weights")
    moved = pretrainer.evaluate(
        x2, y2, sample_weight={"mlm_labels": weights, "nsp_labels": np.ones(4, "float32")},
        batch_size=4, verbose=0, return_dict=True)
    for name, value in results.items():
        np.testing.assert_allclose(moved[name], value, rtol=1e-6, err_msg=name)


def test_label_errors_name_the_expected_keys():
    pretrainer = tiny_pretrainer()
    pretrainer.compile()
    x, y = pretraining_batch()
    del y["nsp_labels"]
    with pytest.raises(ValueError, match="nsp_labels"):
        pretrainer.evaluate(x, y, batch_size=4, verbose=0)


def test_keras_round_trip_keeps_the_tie(tmp_path):
    pretrainer = tiny_pretrainer()
    pretrainer.compile(optimizer=create_optimizer(num_train_steps=100, num_warmup_steps=10))
    pretrainer.optimizer.build(pretrainer.trainable_variables)  # as after a fit()
    x, _ = pretraining_batch()
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertPretrainer)
    assert restored.optimizer.get_config() == pretrainer.optimizer.get_config()
    assert restored.masked_lm_head.token_embedding is restored.encoder.token_embedding
    got = restored(x)
    for name, value in pretrainer(x).items():
        assert_close(got[name], value, err_msg=name)

    # The saved model weights hold the [V, H] matrix once.
    with zipfile.ZipFile(path) as archive:
        archive.extract("model.weights.h5", tmp_path)
    shapes = []
    with h5py.File(tmp_path / "model.weights.h5") as weights_file:
        weights_file.visititems(lambda name, item: shapes.append(item.shape) if isinstance(
            item, h5py.Dataset) and not name.startswith("optimizer") else None)
    assert shapes.count((VOCABULARY_SIZE, TINY["hidden_dim"])) == 1
    assert len(shapes) == len(pretrainer.weights)
    assert len(restored.optimizer.variables) == len(pretrainer.optimizer.variables)

    restored.masked_lm_head.token_embedding.embeddings.assign(
        np.zeros((VOCABULARY_SIZE, TINY["hidden_dim"]), "float32"))
    np.testing.assert_array_equal(to_numpy(restored.encoder.token_embedding.embeddings), 0.0)


def test_preset_round_trip_carries_the_heads(tmp_path):
    pretrainer = tiny_pretrainer()
    x, _ = pretraining_batch()
    pretrainer.save_to_preset(str(tmp_path / "preset"))
    whole = BertPretrainer.from_preset(str(tmp_path / "preset"))  # the saved task itself
    # with encoder overrides: the encoder preset + the heads' canonical weights
    rebuilt = BertPretrainer.from_preset(str(tmp_path / "preset"),
                                         encoder_overrides={"dropout": 0.0})
    expected = pretrainer(x)
    for restored in (whole, rebuilt):
        assert set(restored.weight_map()) == set(pretrainer.weight_map())
        assert {"mlm/output_bias", "nsp/kernel"} <= set(restored.weight_map())
        got = restored(x)
        for name, value in expected.items():
            assert_close(got[name], value, err_msg=name)


def test_checkpoint_without_heads_warns(tmp_path, caplog):
    BertEncoder(**TINY).save_preset(tmp_path / "encoder_only")
    with caplog.at_level(logging.WARNING):
        pretrainer = BertPretrainer.from_preset(str(tmp_path / "encoder_only"))
    assert "no masked LM head weights" in caplog.text
    assert "no next sentence head weights" in caplog.text
    assert isinstance(pretrainer, BertPretrainer)


def _relative_error(got, expected):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return np.linalg.norm(got - expected) / np.linalg.norm(expected)


# bfloat16 keeps 8 significant bits (relative rounding 2**-9 ~ 2e-3 per value); through one
# layer, the heads and a softmax the outputs stay within ~1e-2 of float32. A real bug (a layer
# norm or softmax left in bfloat16 with a wrong epsilon, a weight cast the wrong way, a mask
# lost) moves them by tens of percent.
BF16_RTOL = 3e-2


def test_mixed_bfloat16_matches_float32():
    """The same weights under mixed_bfloat16 give float32's outputs and loss within bf16's
    precision, before and after one (identical) optimizer step."""
    x, y = pretraining_batch()
    full = tiny_pretrainer(num_layers=1)
    half = tiny_pretrainer(num_layers=1, dtype="mixed_bfloat16")
    half.set_weights(full.get_weights())
    assert half.masked_lm_head.compute_dtype == "bfloat16"
    assert half.masked_lm_head.token_embedding.embeddings.dtype == "float32"
    assert all(w.dtype == "float32" for w in half.weights)  # variables stay float32

    def compare(before):
        full_out, half_out = full(x), half(x)
        # after a step only the MLM logits: the NSP logits of this tiny model are ~1e-3, and
        # one step of bfloat16 gradients moves them by ~1e-4 (their loss is compared below)
        for name in ("mlm_logits", "nsp_logits") if before is None else ("mlm_logits",):
            expected, got = to_numpy(full_out[name]), to_numpy(half_out[name])
            error = _relative_error(got, expected)
            assert error < BF16_RTOL, (name, error)
            assert error > 0, name  # bfloat16 really computed this
        if before is not None:  # the step moved the outputs by more than the tolerance
            assert _relative_error(to_numpy(full_out["mlm_logits"]), before) > 3 * BF16_RTOL
        return to_numpy(full_out["mlm_logits"])

    before = compare(None)
    losses = {}
    for name, model in (("full", full), ("half", half)):
        model.compile(optimizer=keras.optimizers.SGD(1.0), run_eagerly=RUN_EAGERLY)
        losses[name] = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
        losses[name + "_after"] = model.evaluate(x, y, batch_size=4, verbose=0,
                                                 return_dict=True)
    for key in ("loss", "mlm_logits_loss", "nsp_logits_loss"):
        np.testing.assert_allclose(losses["half"][key], losses["full"][key], rtol=BF16_RTOL,
                                   err_msg=key)
        np.testing.assert_allclose(losses["half_after"][key], losses["full_after"][key],
                                   rtol=BF16_RTOL, err_msg=key)
    # the step moved the loss well beyond the tolerance (SGD(1.0) may overshoot on some
    # backends' initializations: the direction is test_fit_lowers_the_mlm_loss's business)
    assert abs(losses["full_after"]["loss"] - losses["full"]["loss"]) > 0.05
    compare(before)
