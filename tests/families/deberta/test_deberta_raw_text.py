"""A DeBERTa-v3 classifier as transformers 5 saves it (tokenizer.json beside the weights) is a
task on raw text: `BertClassifier.from_preset` picks the "deberta" SentencePiece tokenizer
and BERT's packing, its ids and logits on real sentences are transformers' (tokenizer and
model), it trains, it teaches a smaller DeBERTa student, and its SavedModel answers raw strings
with the same logits."""

import os
import shutil

import numpy as np
import pytest

from keras_bert_suite import BertClassifier
from tests.conftest import to_numpy
from tests.families.deberta.conftest import CONFIG
from tests.families.conftest import assert_distils
from tests.harness import assert_all_close

pytestmark = pytest.mark.real

SEQUENCE_LENGTH = 40


@pytest.fixture(scope="module")
def classifier_dir(deberta_dir, tmp_path_factory):
    """DebertaV2ForSequenceClassification (3 labels, logits of order 1) + the tokenizer files."""
    import torch
    import transformers

    directory = str(tmp_path_factory.mktemp("deberta_classifier"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(deberta_dir, name), directory)
    torch.manual_seed(0)
    model = transformers.DebertaV2ForSequenceClassification(
        transformers.DebertaV2Config(**CONFIG, num_labels=3))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layernorm" in name.lower():
                parameter.add_(torch.randn_like(parameter) * 0.2)
            if name.startswith("classifier"):
                parameter.mul_(30)
    model.eval().save_pretrained(directory)
    return directory


def _texts(all_sotu_sentences):
    return [s for s in all_sotu_sentences[5000:5200] if len(s) < 120][:6] + [
        "Café déjà vu", "  two  spaces", "tabs\tand\nnewlines"]


@pytest.mark.needs_tf_graph  # the tokenizer is graph code; model parity runs per backend
def test_raw_text_ids_and_logits_are_transformers(classifier_dir, all_sotu_sentences):
    import torch
    import transformers

    texts = _texts(all_sotu_sentences)
    ours = BertClassifier.from_preset(classifier_dir, sequence_length=SEQUENCE_LENGTH)
    tokenizer = transformers.AutoTokenizer.from_pretrained(classifier_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(classifier_dir)
    inputs = tokenizer(texts, padding="max_length", max_length=SEQUENCE_LENGTH,
                       truncation=True, return_tensors="pt")
    x = ours.preprocessor(texts)
    np.testing.assert_array_equal(to_numpy(x["token_ids"]), inputs["input_ids"].numpy())
    with torch.no_grad():
        expected = model.eval()(input_ids=inputs["input_ids"],
                                attention_mask=inputs["attention_mask"]).logits.numpy()
    assert_all_close(to_numpy(ours(x, training=False)), expected, rtol=1e-4, atol=1e-5,
                     what="logits")
    history = ours.fit(texts, np.arange(len(texts)) % 3, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_teacher_distils_into_a_smaller_student(classifier_dir, all_sotu_sentences):
    """A 1-layer student (`student_from_teacher`: the teacher's layer 0, its shared relative
    embeddings and pooler, every weight copied); on real sentences its distribution moves
    toward the teacher's (soft targets and hidden states)."""
    from keras_bert_suite.distillation import student_from_teacher

    # Without dropout: the teacher's 3 small random layers and the student's 1 differ little,
    # and dropout's noise would hide that gap closing.
    teacher = BertClassifier.from_preset(classifier_dir, sequence_length=SEQUENCE_LENGTH,
                                         encoder_overrides={"dropout": 0.0}, dropout=0.0)
    student = student_from_teacher(teacher, num_layers=1)
    encoder = student.encoder
    assert (encoder.block, encoder.num_layers) == ("deberta", 1)
    assert encoder.block_options == teacher.encoder.block_options
    theirs = teacher.encoder.weight_map()
    for name, value in encoder.weight_map().items():
        np.testing.assert_array_equal(to_numpy(value), to_numpy(theirs[name]), err_msg=name)
    assert_distils(teacher, student,
                   [s for s in all_sotu_sentences[9000:9400] if len(s) < 160][:32])


@pytest.mark.needs_savedmodel
def test_served_model_takes_raw_text(classifier_dir, all_sotu_sentences, tmp_path):
    import tensorflow as tf

    from keras_bert_suite.export import export_saved_model

    ours = BertClassifier.from_preset(classifier_dir, sequence_length=SEQUENCE_LENGTH)
    directory = export_saved_model(ours, str(tmp_path / "exports"), name="deberta",
                                   warmup=False)
    served = tf.saved_model.load(directory).signatures["serving_default"]
    texts = all_sotu_sentences[7000:7016] + ["Café déjà vu", "\xa0", ""]
    assert_all_close(served(tf.constant(texts))["logits"].numpy(),
                     ours.predict(texts, verbose=0), rtol=1e-4, atol=1e-5, what="served")
