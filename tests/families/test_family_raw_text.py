"""A family checkpoint as transformers saves it, tokenizer files included, is a task on raw
text: `BertClassifier.from_preset(directory)` picks the family's tokenizer (byte-level BPE,
SentencePiece) and packing, and its logits on real sentences are transformers' logits on
the same strings through transformers' own tokenizer; it trains on raw text too, a RoBERTa
teacher distils into a smaller RoBERTa student, and an ALBERT export answers raw strings from
`kbs serve`'s REST server."""

import os
import shutil

import numpy as np
import pytest

from keras_bert_suite import BertClassifier
from tests.harness import assert_all_close

pytestmark = pytest.mark.real

SEQUENCE_LENGTH = 40
# family: (config class, task class, which tokenizer's files)
CASES = {
    "roberta": ("RobertaConfig", "RobertaForSequenceClassification", "byte_pair"),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForSequenceClassification", "xlm_roberta"),
    "albert": ("AlbertConfig", "AlbertForSequenceClassification", "albert"),
}


def _checkpoint(family, byte_pair_dir, sentencepiece_dirs, directory):
    import torch
    import transformers

    config_class, task_class, kind = CASES[family]
    source = byte_pair_dir if kind == "byte_pair" else sentencepiece_dirs[kind]
    for name in os.listdir(source):
        if name.endswith((".json", ".txt", ".model")):
            shutil.copy(os.path.join(source, name), directory)
    tokenizer = getattr(transformers, task_class.replace(
        "ForSequenceClassification", "Tokenizer")).from_pretrained(directory)
    sizes = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=37, num_labels=3)
    if family == "albert":
        sizes.update(embedding_size=16, pad_token_id=0)
    else:
        sizes.update(type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5,
                     max_position_embeddings=SEQUENCE_LENGTH + 2)
    torch.manual_seed(0)
    model = getattr(transformers, task_class)(getattr(transformers, config_class)(**sizes))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name.lower():
                parameter.add_(torch.randn_like(parameter) * 0.2)
            if name.startswith("classifier"):  # logits of order 1, not 1e-3
                parameter.mul_(30)
    model.eval().save_pretrained(directory)
    return model, tokenizer


@pytest.mark.parametrize("family", list(CASES))
def test_raw_text_logits_match_transformers(family, byte_pair_dir, sentencepiece_dirs,
                                            all_sotu_sentences, tmp_path):
    import torch

    model, tokenizer = _checkpoint(family, byte_pair_dir, sentencepiece_dirs, str(tmp_path))
    texts = [s for s in all_sotu_sentences[5000:5200] if len(s) < 120][:6] + [
        "Café déjà vu", "  two  spaces"]
    ours = BertClassifier.from_preset(str(tmp_path), sequence_length=SEQUENCE_LENGTH)
    logits = ours.predict(texts, verbose=0)
    inputs = tokenizer(texts, padding="max_length", max_length=SEQUENCE_LENGTH,
                       truncation=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**inputs).logits.numpy()
    assert_all_close(logits, expected, rtol=1e-4, atol=1e-5, what=f"{family} logits")

    history = ours.fit(texts, np.arange(len(texts)) % 3, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.needs_savedmodel
@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_served_model_takes_raw_text(family, byte_pair_dir, sentencepiece_dirs,
                                     all_sotu_sentences, tmp_path):
    """The export's graph holds the family's tokenizer (BPE lookup tables, the SentencePiece
    op), passes the op check, computes our logits and answers any string."""
    import tensorflow as tf

    from keras_bert_suite.export import export_saved_model
    from tests.text.test_tokenizer_parity import HARD_CASES

    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    _checkpoint(family, byte_pair_dir, sentencepiece_dirs, str(checkpoint))
    ours = BertClassifier.from_preset(str(checkpoint), sequence_length=SEQUENCE_LENGTH)
    directory = export_saved_model(ours, str(tmp_path / "exports"), name=family, warmup=False)
    served = tf.saved_model.load(directory).signatures["serving_default"]
    texts = all_sotu_sentences[7000:7016]
    assert_all_close(served(tf.constant(texts))["logits"].numpy(),
                     ours.predict(texts, verbose=0), rtol=1e-4, atol=1e-5, what="served")
    fuzz = [t.encode("utf-8") for t in HARD_CASES] + [b"\xff\xfe\xc3", b"<s></s><mask>"]
    logits = served(tf.constant(fuzz))["logits"].numpy()
    assert logits.shape == (len(fuzz), 3) and np.isfinite(logits).all()


def _kl(teacher_logits, student_logits):
    """Mean KL(teacher || student) of the class distributions."""
    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))
    t, s = log_softmax(teacher_logits.astype("float64")), log_softmax(
        student_logits.astype("float64"))
    return float(np.mean((np.exp(t) * (t - s)).sum(-1)))


def test_roberta_teacher_distils_into_a_smaller_student(byte_pair_dir, sentencepiece_dirs,
                                                        all_sotu_sentences, tmp_path):
    """A RoBERTa classifier from transformers teaches a 1-layer student of the same family
    (positions from the padding mask, the BPE tokenizer): the student starts from the
    teacher's layer and its distribution moves toward the teacher's on real sentences."""
    from keras_bert_suite.distillation import BertDistiller, student_from_teacher
    from keras_bert_suite.text import BytePairTokenizer
    from tests.conftest import to_numpy

    _checkpoint("roberta", byte_pair_dir, sentencepiece_dirs, str(tmp_path))
    teacher = BertClassifier.from_preset(str(tmp_path), sequence_length=SEQUENCE_LENGTH)
    student = student_from_teacher(teacher, num_layers=1)
    config = student.encoder.get_config()
    assert (config["num_layers"], config["position_offset"], config["num_segments"]) == (1, 2, 1)
    assert isinstance(student.preprocessor.tokenizer, BytePairTokenizer)
    texts = [s for s in all_sotu_sentences[9000:9400] if len(s) < 160][:48]
    x = {name: to_numpy(value) for name, value in teacher.preprocessor(texts).items()}

    def agreement():
        return _kl(to_numpy(teacher(x, training=False)), to_numpy(student(x, training=False)))

    before = agreement()
    distiller = BertDistiller(teacher, student, temperature=1.0, soft_weight=1.0,
                              hard_weight=0.0, hidden_weight=1.0, attention_weight=0.0)
    distiller.compile(optimizer="adam")  # 1e-3: a few steps move a tiny model
    distiller.fit(x, np.zeros(len(texts), "int32"), batch_size=16, epochs=4, verbose=0,
                  shuffle=False)
    after = agreement()
    assert after < 0.5 * before, (before, after)


@pytest.mark.needs_tf_serving
def test_kbs_serve_answers_raw_text_with_a_family_export(byte_pair_dir, sentencepiece_dirs,
                                                         all_sotu_sentences, tmp_path):
    """`kbs serve`'s REST server loads an ALBERT export (SentencePiece in the graph) and
    answers raw strings with our logits."""
    from keras_bert_suite.export import export_saved_model
    from keras_bert_suite.serving import RestClient
    from keras_bert_suite.serving.model_store import ModelStore
    from keras_bert_suite.serving.server import RestServer

    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    _checkpoint("albert", byte_pair_dir, sentencepiece_dirs, str(checkpoint))
    ours = BertClassifier.from_preset(str(checkpoint), sequence_length=SEQUENCE_LENGTH)
    base = str(tmp_path / "exports")
    export_saved_model(ours, base, name="albert", warmup=False)
    texts = all_sotu_sentences[8000:8012] + ["Café déjà vu", "<s></s>[CLS]"]
    with RestServer(ModelStore(model_base_path=base, poll_seconds=0), port=0) as server:
        rows = RestClient(server.url).predict("albert", instances=texts)
    assert_all_close(np.array([row["logits"] for row in rows]), ours.predict(texts, verbose=0),
                     rtol=1e-4, atol=1e-5, what="served logits")
