"""Optimizers, losses, metrics and schedules in keras_bert_suite/training through the harness:
config round trip by registered name, then values against NumPy written here from the
formulas (Adam: Kingma & Ba, in Keras' epsilon-hat form; LAMB: You et al.; BERT's losses)."""

import keras
import numpy as np
from keras import ops

from keras_bert_suite.training import (
    IGNORE_LABEL, MaskedLMAccuracy, MaskedLMLoss, MaskedLMPerplexity,
    MaskedSparseCategoricalAccuracy, MaskedSparseCategoricalCrossentropy, PerUpdateSchedule,
    WarmupPolynomialDecay, create_optimizer)
from keras_bert_suite.training.losses import ReplacedTokenLoss
from keras_bert_suite.training.metrics import ReplacedTokenAccuracy
from keras_bert_suite.training.optimizers import AdamW, FusedAdamW, Lamb
from tests.harness import (
    assert_all_close, run_loss_test, run_metric_test, run_optimizer_test, run_schedule_test)

LR, DECAY, B1, B2, EPS = 0.1, 0.01, 0.9, 0.999, 1e-6
VARIABLES = {"kernel": np.array([[0.5, -1.0], [2.0, 0.25]]), "bias": np.array([0.1, -0.2])}
# Global norm 0.44 < 1: BERT's clipnorm 1.0 leaves these gradients as they are.
GRADIENTS = {"kernel": np.array([[0.1, -0.2], [0.3, 0.05]]), "bias": np.array([0.2, -0.1])}


def _adam_first_step(gradient):
    """m = (1 - b1) g, v = (1 - b2) g^2; w -= lr sqrt(1 - b2) / (1 - b1) * m / (sqrt(v) + eps)."""
    m, v = (1 - B1) * gradient, (1 - B2) * gradient ** 2
    return LR * np.sqrt(1 - B2) / (1 - B1) * m / (np.sqrt(v) + EPS)


def _decayed(name, value, excluded):
    return value if name in excluded else value * (1 - LR * DECAY)


def test_adamw():
    optimizer = AdamW(learning_rate=LR, weight_decay=DECAY, beta_1=B1, beta_2=B2, epsilon=EPS,
                      global_clipnorm=1.0)
    run_optimizer_test(optimizer, VARIABLES, GRADIENTS, {
        name: _decayed(name, value, ()) - _adam_first_step(GRADIENTS[name])
        for name, value in VARIABLES.items()})


def test_fused_adamw():
    """Keras AdamW's step in one fused kernel per variable (tests/training/test_fused_adamw.py
    compares the two over 10 real steps); bias named out of the decay."""
    optimizer = FusedAdamW(learning_rate=LR, weight_decay=DECAY, beta_1=B1, beta_2=B2,
                           epsilon=EPS, global_clipnorm=1.0,
                           exclude_from_weight_decay_names=["bias"])
    run_optimizer_test(optimizer, VARIABLES, GRADIENTS, {
        name: _decayed(name, value, ("bias",)) - _adam_first_step(GRADIENTS[name])
        for name, value in VARIABLES.items()})


def test_bert_adamw_from_create_optimizer_keeps_bias_undecayed_after_config_round_trip():
    optimizer = create_optimizer("adamw", learning_rate=LR, weight_decay=DECAY, epsilon=EPS)
    run_optimizer_test(optimizer, VARIABLES, GRADIENTS, {
        name: _decayed(name, value, ("bias",)) - _adam_first_step(GRADIENTS[name])
        for name, value in VARIABLES.items()})


def test_bert_adamw_from_create_optimizer_first_step():
    """The step itself of create_optimizer's AdamW (bias excluded from decay)."""
    optimizer = create_optimizer("adamw", learning_rate=LR, weight_decay=DECAY, epsilon=EPS)
    weights = {name: keras.Variable(value.astype("float32"), name=name)
               for name, value in VARIABLES.items()}
    optimizer.apply([ops.convert_to_tensor(GRADIENTS[name].astype("float32"))
                     for name in weights], list(weights.values()))
    assert_all_close(weights, {
        name: _decayed(name, value, ("bias",)) - _adam_first_step(GRADIENTS[name])
        for name, value in VARIABLES.items()}, rtol=1e-5)


def _lamb_first_step(value, gradient):
    """Decoupled decay first, then w -= lr (||w|| / ||u||) u, u = m_hat / (sqrt(v_hat) + eps)."""
    value = value * (1 - LR * DECAY)
    update = gradient / (np.abs(gradient) + EPS)  # m_hat = g, v_hat = g^2 at step 1
    ratio = np.linalg.norm(value) / np.linalg.norm(update)
    return value - LR * ratio * update


def test_lamb():
    optimizer = Lamb(learning_rate=LR, weight_decay=DECAY, beta_1=B1, beta_2=B2, epsilon=EPS)
    run_optimizer_test(optimizer, VARIABLES, GRADIENTS, {
        name: _lamb_first_step(value, GRADIENTS[name]) for name, value in VARIABLES.items()})


# === Losses ===


RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(2, 3, 7)).astype("float32")  # [B, P, V]
LABELS = np.array([[1, 4, 6], [0, 2, 3]], "int32")
WEIGHTS = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]], "float32")


def _cross_entropy(logits, labels):
    logits = logits.astype("float64")
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    return log_z - np.take_along_axis(logits, labels[..., None], -1)[..., 0]


def test_masked_lm_loss():
    expected = (_cross_entropy(LOGITS, LABELS) * WEIGHTS).sum() / WEIGHTS.sum()
    run_loss_test(MaskedLMLoss(name="mlm"), LABELS, LOGITS, expected, sample_weight=WEIGHTS)


def test_masked_sparse_categorical_crossentropy():
    labels = np.where(WEIGHTS > 0, LABELS, IGNORE_LABEL)
    expected = _cross_entropy(LOGITS, LABELS)[WEIGHTS > 0].mean()
    run_loss_test(MaskedSparseCategoricalCrossentropy(ignore_label=IGNORE_LABEL), labels,
                  LOGITS, expected)


# ELECTRA's discriminator: [B, T] "replaced" labels and logits, padding weighted out.
RTD_LABELS = np.array([[0, 1, 0, 1], [1, 0, 0, 0]])
RTD_LOGITS = np.array([[-2.0, 0.5, 1.5, 3.0], [0.2, -0.7, 4.0, -1.0]])
RTD_WEIGHTS = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])


def test_replaced_token_loss():
    p = 1.0 / (1.0 + np.exp(-RTD_LOGITS))
    per_token = -(RTD_LABELS * np.log(p) + (1 - RTD_LABELS) * np.log(1 - p))
    expected = (per_token * RTD_WEIGHTS).sum() / RTD_WEIGHTS.sum()
    run_loss_test(ReplacedTokenLoss(), RTD_LABELS, RTD_LOGITS, expected,
                  sample_weight=RTD_WEIGHTS)


# === Metrics ===


def test_replaced_token_accuracy():
    correct = ((RTD_LOGITS > 0).astype(int) == RTD_LABELS).astype("float64")
    expected = (correct * RTD_WEIGHTS).sum() / RTD_WEIGHTS.sum()  # 5 of 6 real tokens
    assert np.isclose(expected, 5 / 6)
    run_metric_test(ReplacedTokenAccuracy(), RTD_LABELS, RTD_LOGITS, expected,
                    sample_weight=RTD_WEIGHTS)


def test_masked_lm_accuracy():
    logits = LOGITS.copy()
    logits[0, 0, 1] = logits[1, 2, 3] = 10.0  # two right predictions
    correct = (np.take_along_axis(logits, LABELS[..., None], -1)[..., 0]
               >= logits.max(-1)).astype("float64")
    expected = (correct * WEIGHTS).sum() / WEIGHTS.sum()
    assert expected > 0
    run_metric_test(MaskedLMAccuracy(name="acc"), LABELS, logits, expected,
                    sample_weight=WEIGHTS)


def test_masked_lm_perplexity():
    expected = np.exp((_cross_entropy(LOGITS, LABELS) * WEIGHTS).sum() / WEIGHTS.sum())
    run_metric_test(MaskedLMPerplexity(name="ppl"), LABELS, LOGITS, expected,
                    sample_weight=WEIGHTS)


def test_masked_sparse_categorical_accuracy():
    labels = np.where(WEIGHTS > 0, LABELS, IGNORE_LABEL)
    logits = LOGITS.copy()
    logits[0, 1, 4] = 10.0  # one right prediction among the labelled ones
    expected = (logits.argmax(-1) == LABELS)[WEIGHTS > 0].mean()
    assert expected > 0
    run_metric_test(MaskedSparseCategoricalAccuracy(ignore_label=IGNORE_LABEL), labels, logits,
                    expected)


# === Schedules ===


PEAK, END = 1e-3, 1e-5


def _warmup_then_linear(step, warmup=10, total=100):
    """google-research/bert optimization.py: linear warm-up, then linear decay over all steps."""
    if step < warmup:
        return PEAK * step / warmup
    return (PEAK - END) * (1 - min(step, total) / total) + END


def test_warmup_polynomial_decay():
    steps = [0, 5, 10, 55, 100, 150]
    run_schedule_test(WarmupPolynomialDecay(PEAK, total_steps=100, warmup_steps=10,
                                            end_learning_rate=END, power=1.0),
                      steps, [_warmup_then_linear(s) for s in steps])


def test_per_update_schedule():
    inner = WarmupPolynomialDecay(PEAK, total_steps=100, warmup_steps=10, end_learning_rate=END)
    steps = [0, 3, 20, 43, 400]  # 4 micro-batches per update: updates 0, 0, 5, 10, 100
    run_schedule_test(PerUpdateSchedule(inner, 4), steps,
                      [_warmup_then_linear(s // 4) for s in steps])
