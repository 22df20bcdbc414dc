"""Knowledge distillation on every backend: the losses against hand computations, students
that move toward their teacher, DistilBERT's initialisation, teacher outputs from disk, the
distiller through the harness, bad input, and a student served from a TF-only host."""

import keras
import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler, BertTokenClassifier)
from keras_bert_suite.distillation import (
    BertDistiller, evenly_spaced_layers, every_other_layer, student_from_teacher,
    with_teacher_outputs, write_teacher_outputs)
from keras_bert_suite.distillation import losses
from keras_bert_suite.distillation.internals import run_with_hidden_states
from tests.conftest import alternating_reviews, to_numpy
from tests.harness import check_config_round_trip, run_model_saving_test
from tests.numerics import assert_close
from tests.tiny_pretraining import RUN_EAGERLY

TEACHER_PRESET = "bert_uncased_L-4_H-256_A-4"  # random weights: shapes and numbers, no download
# Where a test needs no choice of teacher layers, a 2-layer teacher and a 1-layer student:
# tracing the distiller's step costs time per layer, and one layer still distils.
SMALL_TEACHER = "bert_uncased_L-2_H-128_A-2"
LENGTH = 16


def _log_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def _kl(t_logits, s_logits, temperature):
    t, s = _log_softmax(t_logits / temperature), _log_softmax(s_logits / temperature)
    return (np.exp(t) * (t - s)).sum(-1) * temperature ** 2


@pytest.fixture(scope="module")
def reviews():
    return alternating_reviews(16)


@pytest.fixture(scope="module")
def teacher():
    return BertClassifier.from_preset(TEACHER_PRESET, load_weights=False, num_classes=2,
                                      sequence_length=LENGTH)


@pytest.fixture(scope="module")
def small_teacher():
    """A 2-layer classifier teacher, for tests that need no choice of teacher layers."""
    return BertClassifier.from_preset(SMALL_TEACHER, load_weights=False, num_classes=2,
                                      sequence_length=LENGTH)


@pytest.fixture(scope="module")
def pretrainer():
    return BertPretrainer.from_preset(SMALL_TEACHER, load_weights=False)


def _eager_on_tensorflow(distiller):
    """For a step or two: tracing the distiller's step on TensorFlow (teacher, student and
    losses) costs seconds that running it eagerly does not. The traced step is checked by
    the tests that train for epochs, the harness test and the recipe's."""
    distiller.run_eagerly = RUN_EAGERLY
    return distiller


def _inputs(task, texts):
    return {name: to_numpy(value) for name, value in task.preprocessor(texts).items()}


# === The losses, against numpy ===


def test_soft_target_loss_is_temperature_scaled_kl():
    rng = np.random.default_rng(0)
    teacher_logits, student_logits = rng.normal(size=(4, 3)) * 3, rng.normal(size=(4, 3))
    expected = _kl(teacher_logits, student_logits, 2.0)  # [B]
    assert_close(losses.soft_target_loss(teacher_logits.astype("float32"),
                                         student_logits.astype("float32"), 2.0), expected,
                 rtol=1e-5)
    # Per token, masked: only the real positions count in each example's mean.
    t, s = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "float32")
    per_token = _kl(t, s, 1.5)
    expected = (per_token * mask).sum(1) / mask.sum(1)
    assert_close(losses.soft_target_loss(t.astype("float32"), s.astype("float32"), 1.5, mask),
                 expected, rtol=1e-5)
    # One logit (regression): the squared difference.
    assert_close(losses.soft_target_loss(np.array([[1.0], [2.0]], "float32"),
                                         np.array([[0.5], [3.0]], "float32"), 4.0),
                 [0.25, 1.0])


def test_hidden_and_relation_losses_match_hand_computation():
    rng = np.random.default_rng(1)
    t, s = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 4, 6))
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], "float32")
    error = ((t - s) ** 2).mean(-1)
    assert_close(losses.hidden_state_loss(t.astype("float32"), s.astype("float32"), mask),
                 (error * mask).sum(1) / mask.sum(1), rtol=1e-5)
    packed = mask * np.array([[1, 1, 2, 0], [1, 2, 2, 3]], "float32")  # instance numbers
    assert_close(losses.hidden_state_loss(t.astype("float32"), s.astype("float32"), packed),
                 (error * mask).sum(1) / mask.sum(1), rtol=1e-5)  # each token once

    # MiniLM's relation: softmax(A B^T / sqrt(d)) per relation head, padding keys excluded.
    heads = 2
    ta, tb, sa, sb = (rng.normal(size=(2, 4, 6)) for _ in range(4))

    def relation(a, b, keys=mask[:, None, None, :] > 0):
        a = a.reshape(2, 4, heads, 3).transpose(0, 2, 1, 3)
        b = b.reshape(2, 4, heads, 3).transpose(0, 2, 1, 3)
        scores = a @ b.transpose(0, 1, 3, 2) / np.sqrt(3)
        scores = np.where(keys, scores, -1e9)
        return _log_softmax(scores)

    t_rel, s_rel = relation(ta, tb), relation(sa, sb)
    per_query = (np.exp(t_rel) * (t_rel - s_rel)).sum(-1).mean(1)  # [B, T]
    expected = (per_query * mask).sum(1) / mask.sum(1)
    actual = losses.relation_loss((ta.astype("float32"), tb.astype("float32")),
                                  (sa.astype("float32"), sb.astype("float32")), heads, mask)
    assert_close(actual, expected, rtol=1e-4, atol=1e-6)

    # Packed rows: a query's relations take only its own instance's keys, as its attention.
    keys = (packed[:, :, None] == packed[:, None, :]) & (packed[:, None, :] > 0)  # [B, T, T]
    t_rel, s_rel = relation(ta, tb, keys[:, None]), relation(sa, sb, keys[:, None])
    per_query = (np.exp(t_rel) * (t_rel - s_rel)).sum(-1).mean(1)
    expected = (per_query * mask).sum(1) / mask.sum(1)
    actual = losses.relation_loss((ta.astype("float32"), tb.astype("float32")),
                                  (sa.astype("float32"), sb.astype("float32")), heads, packed)
    assert_close(actual, expected, rtol=1e-4, atol=1e-6)


# === DistilBERT's initialisation ===


def test_student_copies_the_chosen_teacher_layers_exactly(teacher, reviews):
    assert evenly_spaced_layers(12, 6) == (0, 2, 4, 7, 9, 11)  # DistilBERT's choice
    assert evenly_spaced_layers(6, 3) == (0, 3, 5)  # halves round up
    assert evenly_spaced_layers(4, 1) == (0,)
    student = student_from_teacher(teacher, layers=[0, 3])
    assert student.encoder.num_layers == 2 and type(student) is BertClassifier
    t_weights, s_weights = teacher.encoder.weight_map(), student.encoder.weight_map()
    for name, variable in s_weights.items():
        source = {"layer_0/": "layer_0/", "layer_1/": "layer_3/"}.get(name[:8], "")
        source = source + name[8:] if source else name
        np.testing.assert_array_equal(to_numpy(variable), to_numpy(t_weights[source]), name)
    np.testing.assert_array_equal(to_numpy(student.classifier_head.kernel),
                                  to_numpy(teacher.classifier_head.kernel))
    # The first student layer is the teacher's first: the same hidden state, bit for bit.
    x = _inputs(teacher, reviews[0][:4])
    _, t_hidden = run_with_hidden_states(teacher, x, training=False)
    _, s_hidden = run_with_hidden_states(student, x, training=False)
    np.testing.assert_array_equal(to_numpy(s_hidden[1]), to_numpy(t_hidden[1]))
    assert student.preprocessor is teacher.preprocessor


@pytest.mark.parametrize("task_class, arguments, head", [
    (BertClassifier, {"num_classes": 3}, None),
    (BertTokenClassifier, {"num_classes": 3}, None),
    (BertSpanLabeler, {}, None),
])
def test_head_outputs_are_the_models_own(task_class, arguments, head, reviews):
    """The distiller runs the encoder itself (for its hidden states) and then the task's
    head_outputs: the same numbers as calling the task."""
    task = task_class.from_preset(SMALL_TEACHER, load_weights=False, sequence_length=LENGTH,
                                  **arguments)
    texts = reviews[0][:3]
    x = task.preprocessor((texts, texts)) if task_class is BertSpanLabeler else None
    if x is None:
        x = task.preprocessor(texts) if task_class is BertClassifier else task.preprocessor(
            [text.split() for text in texts])
    x = {name: to_numpy(value) for name, value in (x[0] if isinstance(x, tuple) else x).items()
         if name in ("token_ids", "segment_ids", "padding_mask")}
    outputs, hidden = run_with_hidden_states(task, x, training=False)
    assert len(hidden) == task.encoder.num_layers + 1
    assert_close_structure(outputs, task(x, training=False))


def test_pretrainer_head_outputs_are_the_models_own(pretrainer):
    x = _pretraining_batch()[0]
    outputs, _ = run_with_hidden_states(pretrainer, x, training=False)
    assert_close_structure(outputs, pretrainer(x, training=False))


def assert_close_structure(actual, expected):
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected)
        for key in expected:
            assert_close(actual[key], expected[key], rtol=1e-5, atol=1e-5)
    else:
        assert_close(actual, expected, rtol=1e-5, atol=1e-5)


# === Training ===


def _decisive(task, seed=0):
    """`task` with a head whose logits are a few units (a random BERT head's are ~0.02, so
    every class distribution is ~uniform and there is nothing to distil); a new classifier
    on the same encoder unless `task` is changed in place (seed given)."""
    if seed == 0:
        task = BertClassifier(task.encoder, num_classes=2, preprocessor=task.preprocessor)
    kernel = task.classifier_head.kernel
    kernel.assign(np.random.default_rng(seed).normal(scale=0.5, size=kernel.shape)
                  .astype("float32"))
    return task


def _student_agreement(teacher, student, x):
    """Mean KL(teacher || student) of the two models' class distributions on x."""
    return float(np.mean(_kl(to_numpy(teacher(x, training=False)).astype("float64"),
                             to_numpy(student(x, training=False)).astype("float64"), 1.0)))


def test_distilled_student_moves_toward_its_teacher(small_teacher, reviews, monkeypatch):
    """The student moves toward its teacher, in a train step traced once on TensorFlow and
    JAX (TensorFlow traces a step that creates variables twice: the hidden projection's, the
    optimizer's slots)."""
    texts, labels = reviews
    teacher = _decisive(small_teacher)
    x = _inputs(teacher, texts)
    # A 1-layer student half the teacher's width (tracing the step is most of the time). By
    # the 4th epoch its KL was below 0.06 of the start (3 seeds on TensorFlow, 2 on JAX).
    student = BertClassifier(BertEncoder(vocabulary_size=30522, num_layers=1, num_heads=2,
                                         hidden_dim=64, intermediate_dim=128),
                             num_classes=2, preprocessor=teacher.preprocessor)
    before = _student_agreement(teacher, student, x)
    distiller = BertDistiller(teacher, student, temperature=1.0, soft_weight=1.0,
                              hard_weight=0.0, hidden_weight=1.0, attention_weight=1.0,
                              num_relation_heads=2)
    assert distiller.hidden_projection is not None  # widths 64 -> 128 (TinyBERT's W_h)
    distiller.compile(optimizer="adam")  # "adam" at 1e-3: a few steps move a tiny model
    traces = _count_calls(monkeypatch, BertDistiller, "train_step")
    history = distiller.fit(x, labels, batch_size=8, epochs=4, verbose=0, shuffle=False)
    if keras.backend.backend() != "torch":  # PyTorch runs the step eagerly: once a batch
        assert len(traces) == 1, f"the train step was traced {len(traces)} times"
    after = _student_agreement(teacher, student, x)
    assert after < 0.5 * before, (before, after)
    for name in ("soft_loss", "hidden_loss"):
        assert history.history[name][-1] < history.history[name][0], (name, history.history)


def _count_calls(monkeypatch, owner, name):
    """A list that grows by one at each call of owner.name (a traced step: at each trace)."""
    calls, original = [], getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_attention_relations_alone_pull_the_student_relations_in(teacher, reviews):
    texts, labels = reviews
    x = _inputs(teacher, texts)
    student = BertClassifier.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False,
                                         num_classes=2, preprocessor=teacher.preprocessor)
    distiller = BertDistiller(teacher, student, soft_weight=0.0, hard_weight=0.0,
                              attention_weight=1.0, num_relation_heads=2,
                              relations=["qq", "kk", "vv"])
    distiller.compile(optimizer="adam")
    history = distiller.fit(x, labels, batch_size=8, epochs=4, verbose=0, shuffle=False)
    losses_by_epoch = history.history["attention_loss"]
    assert losses_by_epoch[-1] < 0.5 * losses_by_epoch[0], losses_by_epoch


def test_distiller_loss_is_its_terms_weighted(small_teacher, reviews):
    teacher = small_teacher
    texts, labels = reviews[0][:8], reviews[1][:8]
    # Another random model, so that the two distributions differ enough to compare the KL
    # (a copied student's KL is ~1e-5: float32 cancellation would dominate).
    student = BertClassifier.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False,
                                         num_classes=2, preprocessor=teacher.preprocessor)
    teacher = _decisive(teacher)
    _decisive(student, seed=1)
    x = _inputs(teacher, texts)
    distiller = _eager_on_tensorflow(BertDistiller(teacher, student, temperature=3.0,
                                                   soft_weight=0.7, hard_weight=0.3))
    logs = distiller.evaluate(x, labels, batch_size=8, verbose=0, return_dict=True)
    t_logits = to_numpy(teacher(x, training=False)).astype("float64")
    s_logits = to_numpy(student(x, training=False)).astype("float64")
    soft = _kl(t_logits, s_logits, 3.0).mean()
    hard = -_log_softmax(s_logits)[np.arange(8), labels].mean()
    assert_close(logs["soft_loss"], soft, rtol=1e-4, atol=1e-7)
    assert_close(logs["hard_loss"], hard, rtol=1e-4)
    assert_close(logs["loss"], 0.7 * soft + 0.3 * hard, rtol=1e-4)
    assert_close(logs["accuracy"], (s_logits.argmax(-1) == labels).mean())


def test_teacher_outputs_from_disk_give_the_same_loss(small_teacher, reviews, tmp_path):
    import tensorflow as tf

    teacher = small_teacher
    texts, labels = reviews[0][:8], reviews[1][:8]
    x = _inputs(teacher, texts)
    batches = tf.data.Dataset.from_tensor_slices((x, labels)).batch(4)
    path = str(tmp_path / "teacher.tfrecord")
    assert write_teacher_outputs(teacher, batches, path, verbose=0) == 8
    data = with_teacher_outputs(batches, path, batch_size=8)
    features, targets = next(iter(data))
    assert_close(targets["teacher_outputs"], to_numpy(teacher(x, training=False)), rtol=1e-5,
                 atol=1e-6)
    np.testing.assert_array_equal(to_numpy(targets["labels"]), labels)

    student = student_from_teacher(teacher, num_layers=1)
    live = _eager_on_tensorflow(BertDistiller(teacher, student)).evaluate(
        x, labels, batch_size=8, verbose=0, return_dict=True)
    offline = _eager_on_tensorflow(BertDistiller(None, student)).evaluate(
        data, verbose=0, return_dict=True)
    assert_close(offline["loss"], live["loss"], rtol=1e-4)
    history = _eager_on_tensorflow(BertDistiller(None, student)).fit(
        with_teacher_outputs(batches, path, batch_size=4, shuffle_buffer=8, seed=0),
        epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.parametrize("task_class", [BertTokenClassifier, BertSpanLabeler])
def test_token_and_span_students_train(task_class, reviews):
    arguments = {"num_classes": 3} if task_class is BertTokenClassifier else {}
    teacher = task_class.from_preset(SMALL_TEACHER, load_weights=False, sequence_length=LENGTH,
                                     **arguments)
    student = student_from_teacher(teacher, num_layers=1)
    texts = reviews[0][:4]
    if task_class is BertTokenClassifier:
        words = [text.split()[:8] for text in texts]
        y = [[i % 3 for i in range(len(w))] for w in words]
        x = words
    else:
        x = (["What is it?"] * 4, texts)
        y = {"answer_start": [0] * 4, "answer_text": [text[:4] for text in texts]}
    distiller = _eager_on_tensorflow(
        BertDistiller(teacher, student, hidden_weight=1.0, attention_weight=1.0))
    history = distiller.fit(x, y, epochs=1, verbose=0)
    assert all(np.isfinite(values[0]) for values in history.history.values()), history.history
    assert history.history["soft_loss"][0] >= 0


def test_multiple_choice_student_distils_on_choice_logits():
    from keras_bert_suite import BertMultipleChoice

    teacher = BertMultipleChoice.from_preset(SMALL_TEACHER, load_weights=False, num_choices=2,
                                             sequence_length=LENGTH)
    student = student_from_teacher(teacher, num_layers=1)
    contexts = ["She opens the door.", "He picks up the guitar."]
    choices = [["She walks in.", "She eats the door."], ["He plays a song.", "He is a song."]]
    x = {name: to_numpy(value)  # [B, C, T]
         for name, value in student.preprocessor((contexts, choices)).items()}
    # Teacher outputs given (a random teacher's choice logits are ~equal: nothing to compare).
    teacher_logits = np.array([[3.0, -1.0], [0.5, 2.0]], "float32")
    targets = {"labels": np.array([0, 1]), "teacher_outputs": teacher_logits}
    logs = _eager_on_tensorflow(BertDistiller(
        None, student, temperature=2.0, soft_weight=1.0, hard_weight=0.0)).evaluate(
            x, targets, batch_size=2, verbose=0, return_dict=True)
    student_logits = to_numpy(student(x, training=False)).astype("float64")
    assert_close(logs["soft_loss"], _kl(teacher_logits, student_logits, 2.0).mean(), rtol=1e-5)
    history = _eager_on_tensorflow(BertDistiller(teacher, student)).fit(
        (contexts, choices), [0, 1], verbose=0)
    assert np.isfinite(history.history["loss"][0])


def _pretraining_batch():
    ids = np.array([[101, 2023, 103, 2003, 102, 2204, 103, 102]] * 2, "int32")
    x = {"token_ids": ids, "segment_ids": np.array([[0] * 5 + [1] * 3] * 2, "int32"),
         "padding_mask": np.ones((2, 8), "int32"),
         "mask_positions": np.array([[2, 6], [2, 6]], "int32")}
    y = {"mlm_labels": np.array([[3185, 3319], [3185, 0]], "int32"),
         "mlm_weights": np.array([[1.0, 1.0], [1.0, 0.0]], "float32"),
         "nsp_labels": np.array([0, 1], "int32")}
    return x, y


def _student_unlike(teacher):
    """A 1-layer student of `teacher` with a random MLM output bias of a few units. A random
    teacher and its copied student predict nearly the same near-uniform distributions: a KL
    of ~1e-3 that float32 sums from 30k terms of size ~log V and rounds by ~1e-6, which no
    relative tolerance holds on every CPU. The bias makes the KL ~1."""
    student = student_from_teacher(teacher, num_layers=1)
    bias = np.random.default_rng(0).normal(0.0, 2.0, student.masked_lm_head.output_bias.shape)
    student.masked_lm_head.output_bias.assign(bias.astype("float32"))
    return student


def _pretraining_soft_loss(teacher, student, x, mlm_weights, temperature):
    """The hand soft loss of two pretrainers: the MLM KL averaged over each example's real
    predictions (weight 1; at least one slot counts, as the model divides), plus NSP's."""
    t, s = teacher(x, training=False), student(x, training=False)
    mlm = _kl(to_numpy(t["mlm_logits"]).astype("float64"),
              to_numpy(s["mlm_logits"]).astype("float64"), temperature)  # [B, P]
    mlm = ((mlm * mlm_weights).sum(1) / np.maximum(mlm_weights.sum(1), 1)).mean()
    nsp = _kl(to_numpy(t["nsp_logits"]).astype("float64"),
              to_numpy(s["nsp_logits"]).astype("float64"), temperature).mean()
    return mlm + nsp


def test_a_pruned_model_recovers_by_distillation(small_teacher, reviews):
    from keras_bert_suite import pruning

    teacher = small_teacher
    pruned = pruning.prune_units(teacher, heads_to_remove={1: [0]},
                                 neurons_to_remove={0: list(range(256))})
    x = _inputs(teacher, reviews[0][:8])
    distiller = _eager_on_tensorflow(BertDistiller(
        teacher, pruned, hidden_weight=1.0, attention_weight=1.0,
        num_relation_heads=1))  # the last layers: 2 and 1 heads of 64
    history = distiller.fit(x, reviews[1][:8], batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert pruned.encoder.layer_num_heads == [2, 1]


def test_masked_lm_distillation_on_the_pretraining_data_path(pretrainer):
    """Task-agnostic distillation on real text: State of the Union paragraphs through the
    pretraining data path (instances, dynamic masking), as `kbs pretrain` reads them. The
    soft loss counts the real masked-LM predictions only (mlm_weights 1)."""
    from keras_bert_suite import BertTokenizer, recipe_runner
    from keras_bert_suite.tasks.pretrainer.data.recipe_data import build_datasets

    recipe = recipe_runner.load_recipe("pretrain_cpu_smoke", overrides=[
        "data.max_files=2", "data.sequence_length=32", "data.max_predictions_per_seq=5",
        "data.dupe_factor=1", "training.batch_size=4", "data.eval_fraction=0.0"])
    train, _ = build_datasets(recipe, BertTokenizer.from_preset("minilm_l6_h384_uncased"),
                              log=lambda *_: None)
    batches = [(
        {name: to_numpy(value) for name, value in x.items()},
        {name: to_numpy(value) for name, value in y.items()}) for x, y in train.take(2)]
    x, y = batches[0]
    assert x["token_ids"].shape == (4, 32) and y["mlm_weights"].sum() > 0
    # One real prediction weighted 0 (as padding slots are): it must not count. The student's
    # KL there is ~1 (_student_unlike), so counting it would move the loss well past rtol.
    y["mlm_weights"] = y["mlm_weights"].copy()
    y["mlm_weights"][0, 0] = 0.0
    teacher = pretrainer
    student = _student_unlike(teacher)
    distiller = _eager_on_tensorflow(BertDistiller(teacher, student, temperature=2.0,
                                                   soft_weight=1.0, hard_weight=1.0))
    logs = distiller.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    expected = _pretraining_soft_loss(teacher, student, x, y["mlm_weights"], 2.0)
    assert expected > 0.1
    assert_close(logs["soft_loss"], expected, rtol=1e-4)
    # Two training steps on the pipeline's batches, with the attention relations too.
    x = {name: np.concatenate([b[0][name] for b in batches]) for name in batches[0][0]}
    y = {name: np.concatenate([b[1][name] for b in batches]) for name in batches[0][1]}
    history = _eager_on_tensorflow(BertDistiller(
        teacher, student, hard_weight=1.0, attention_weight=1.0)).fit(
            x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0]) and "mlm_logits_accuracy" in history.history


def test_distilbert_triple_loss_on_a_masked_lm(pretrainer):
    """DistilBERT: 5 x soft targets (T = 2) + 2 x the masked LM + 1 x the cosine of the last
    hidden states, on a student of every other teacher layer; the cosine term against numpy,
    over real tokens only."""
    x, y = _pretraining_batch()
    x["padding_mask"] = x["padding_mask"].copy()
    x["padding_mask"][1, 6:] = 0  # padding: its hidden states must not count
    del y["nsp_labels"]
    teacher = BertPretrainer(pretrainer.encoder, next_sentence_prediction=False)
    student = student_from_teacher(teacher, layers="every_other")
    assert every_other_layer(12) == (0, 2, 4, 6, 8, 10) and student.encoder.num_layers == 1
    for mine, theirs in zip(student.encoder.transformer_layers[0].weights,
                            teacher.encoder.transformer_layers[0].weights):
        np.testing.assert_array_equal(to_numpy(mine), to_numpy(theirs))
    bias = np.random.default_rng(0).normal(0.0, 2.0, student.masked_lm_head.output_bias.shape)
    student.masked_lm_head.output_bias.assign(bias.astype("float32"))  # unlike its teacher
    distiller = _eager_on_tensorflow(BertDistiller(
        teacher, student, temperature=2.0, soft_weight=5.0, hard_weight=2.0, cosine_weight=1.0))
    logs = distiller.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    t = to_numpy(run_with_hidden_states(teacher, x, training=False)[1][-1]).astype("float64")
    s = to_numpy(run_with_hidden_states(student, x, training=False)[1][-1]).astype("float64")
    cosine = 1 - (t * s).sum(-1) / np.sqrt((t * t).sum(-1) * (s * s).sum(-1))  # [B, T]
    real = x["padding_mask"] > 0
    expected = (cosine * real).sum() / real.sum()  # over the batch's tokens, as DistilBERT
    assert_close(logs["cosine_loss"], expected, rtol=1e-5, atol=1e-6)
    assert not np.isclose(expected, ((cosine * real).sum(1) / real.sum(1)).mean(), rtol=1e-3)
    assert_close(logs["loss"], 5.0 * logs["soft_loss"] + 2.0 * logs["hard_loss"]
                 + 1.0 * logs["cosine_loss"], rtol=1e-5)
    with pytest.raises(ValueError, match="cosine_weight compares hidden states of equal width"):
        BertDistiller(BertPretrainer.from_preset(TEACHER_PRESET, load_weights=False),
                      student, cosine_weight=1.0)


# === Lifecycle ===


def test_distiller_goes_through_the_harness(small_teacher, reviews, tmp_path):
    teacher = small_teacher
    student = student_from_teacher(teacher, num_layers=1)
    distiller = BertDistiller(teacher, student, temperature=2.0, hidden_weight=0.5,
                              attention_weight=0.5, layer_map=[1],  # not the default (2,)
                              relations=["qq", "kk", "vv"])
    restored = check_config_round_trip(distiller)
    assert restored.layer_map == (1,) and restored.relations == ("qq", "kk", "vv")
    x = _inputs(teacher, reviews[0][:4])
    distiller.fit(x, reviews[1][:4], batch_size=4, verbose=0)
    run_model_saving_test(distiller, x, tmp_path=str(tmp_path))
    # The student is an ordinary task model: its own .keras round trip.
    run_model_saving_test(student, x, tmp_path=str(tmp_path))


def test_recipe_distils_a_student(tmp_path):
    from keras_bert_suite import recipe_runner

    recipe = recipe_runner.load_recipe("distill_rotten_tomatoes_cpu", overrides=[
        f"model.preset=\"{SMALL_TEACHER}\"", "model.load_weights=false",
        "data.max_train_examples=32", "data.max_eval_examples=32", "data.sequence_length=16",
        "training.num_train_steps=2", "distillation.student_layers=1"])
    summary = recipe_runner.run_recipe(recipe, str(tmp_path), command="distill", verbose=0,
                                       log=lambda *_: None)
    metrics = summary["metrics"]
    assert metrics["student_layers"] == 1 and metrics["eval_examples"] == 32
    assert metrics["student_parameters"] < metrics["teacher_parameters"]
    assert 0.0 <= metrics["accuracy"] <= 1.0 and "teacher" in metrics
    assert (tmp_path / "model.keras").exists() and (tmp_path / "teacher" / "model.keras").exists()
    with pytest.raises(Exception, match="cannot run recipe"):
        recipe_runner.run_recipe(recipe, str(tmp_path), command="finetune")
    for name in ("distill_squad_v1_gpu", "distill_glue_mrpc_tpu"):  # GPU / TPU scale
        loaded = recipe_runner.load_recipe(name)
        assert loaded["distillation"]["student_layers"] == 6 and loaded["description"]


# === Bad input: clear errors before training starts ===


def test_bad_pairs_and_arguments_have_clear_errors(teacher):
    student = student_from_teacher(teacher, num_layers=2)

    def classifier(num_layers=1, hidden_dim=16):
        # Small random encoders over the teacher's vocabulary: only depth and width matter.
        return BertClassifier(BertEncoder(
            vocabulary_size=30522, num_layers=num_layers, num_heads=2, hidden_dim=hidden_dim,
            intermediate_dim=32), num_classes=2, preprocessor=teacher.preprocessor)

    with pytest.raises(ValueError, match="deeper or wider than the teacher"):
        BertDistiller(teacher, classifier(num_layers=5))  # the teacher has 4 layers of 256
    with pytest.raises(ValueError, match="deeper or wider than the teacher"):
        BertDistiller(teacher, classifier(hidden_dim=264))
    with pytest.raises(ValueError, match="vocabularies differ"):
        BertDistiller(teacher, BertClassifier(BertEncoder(
            vocabulary_size=1000, num_layers=1, num_heads=2, hidden_dim=16,
            intermediate_dim=32), num_classes=2))
    with pytest.raises(ValueError, match="same task"):
        BertDistiller(teacher, BertTokenClassifier(student.encoder, num_classes=2))
    with pytest.raises(ValueError, match="num_classes"):
        BertDistiller(teacher, BertClassifier(student.encoder, num_classes=3))
    with pytest.raises(ValueError, match=r"layer_map\[1\] = 5 is not a teacher layer"):
        BertDistiller(teacher, student, hidden_weight=1.0, layer_map=[1, 5])
    with pytest.raises(ValueError, match="one teacher layer per student layer"):
        BertDistiller(teacher, student, hidden_weight=1.0, layer_map=[1])
    with pytest.raises(ValueError, match="attention_layers"):
        BertDistiller(teacher, student, attention_weight=1.0, attention_layers=(5, 1))
    with pytest.raises(ValueError, match="num_relation_heads=3"):
        BertDistiller(teacher, student, attention_weight=1.0, num_relation_heads=3)
    with pytest.raises(ValueError, match="relations are pairs"):
        BertDistiller(teacher, student, attention_weight=1.0, relations=["qx"])
    with pytest.raises(ValueError, match="temperature"):
        BertDistiller(teacher, student, temperature=0)
    with pytest.raises(ValueError, match="Nothing to distil"):
        BertDistiller(teacher, student, soft_weight=0.0)
    with pytest.raises(ValueError, match="need the teacher itself"):
        BertDistiller(None, student, hidden_weight=1.0)
    with pytest.raises(ValueError, match="num_layers must be 1..4"):
        student_from_teacher(teacher, num_layers=5)
    with pytest.raises(ValueError, match="increasing, distinct"):
        student_from_teacher(teacher, layers=[2, 1])
    with pytest.raises(ValueError, match="one of num_layers"):
        student_from_teacher(teacher)


# === Export: a student serves like any model ===


@pytest.mark.needs_savedmodel
def test_student_export_answers_on_a_tensorflow_only_host(small_teacher, reviews, tmp_path):
    from keras_bert_suite.export import export_saved_model, unservable_ops
    from tests.export.conftest import AWKWARD_TEXTS, run_on_serving_host

    student = student_from_teacher(small_teacher, num_layers=1)
    path = export_saved_model(student, str(tmp_path / "saved_models"), name="student",
                              warmup=False)
    assert unservable_ops(path) == {}
    texts = np.array([t.encode() for t in reviews[0][:4]] + AWKWARD_TEXTS, dtype=object)
    results, leaked = run_on_serving_host(
        [{"export": path, "signature": "serving_default", "inputs": {"text": texts}}],
        str(tmp_path))
    assert not leaked and "error" not in results[0], results[0]
    expected = to_numpy(student.predict([t.decode("utf-8", "replace") for t in texts],
                                        verbose=0))
    assert_close(results[0]["logits"], expected, rtol=1e-4, atol=1e-5)
