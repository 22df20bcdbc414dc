"""A family checkpoint as transformers saves it, tokenizer files included, is a task on raw
text: `BertClassifier.from_preset(directory)` picks the family's tokenizer (byte-level BPE,
SentencePiece) and packing, and its logits on real sentences are transformers' logits on
the same strings through transformers' own tokenizer; it trains on raw text too, a RoBERTa
teacher distils into a smaller RoBERTa student, and an ALBERT export answers raw strings from
`kbs serve`'s REST server. A directory as transformers 5 writes it (tokenizer.json only)
loads for every family, and our save_huggingface output loads back in transformers."""

import os
import shutil

import numpy as np
import pytest

from keras_bert_suite import BertClassifier
from keras_bert_suite import save_huggingface
from tests.conftest import to_numpy
from tests.families.conftest import assert_distils
from tests.harness import assert_all_close

pytestmark = pytest.mark.real

SEQUENCE_LENGTH = 40
# family: (config class, task class, which tokenizer's files)
CASES = {
    "roberta": ("RobertaConfig", "RobertaForSequenceClassification", "byte_pair"),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForSequenceClassification", "xlm_roberta"),
    "albert": ("AlbertConfig", "AlbertForSequenceClassification", "albert"),
    "bert": ("BertConfig", "BertForSequenceClassification", "wordpiece"),
    "distilbert": ("DistilBertConfig", "DistilBertForSequenceClassification", "wordpiece"),
    "electra": ("ElectraConfig", "ElectraForSequenceClassification", "wordpiece"),
}
FAMILY_FILES = ["roberta", "xlm-roberta", "albert"]  # the families with files of their own


def _checkpoint(family, byte_pair_dir, sentencepiece_dirs, directory, minilm_dir=None,
                tokenizer_json_only=False):
    """A random transformers task model of `family` saved in `directory` with its tokenizer:
    the family's own files (vocab.json + merges.txt, the SentencePiece model), or with
    `tokenizer_json_only` what transformers 5's fast tokenizer saves (tokenizer.json and
    tokenizer_config.json, nothing else)."""
    import torch
    import transformers

    config_class, task_class, kind = CASES[family]
    source = {"byte_pair": byte_pair_dir, "wordpiece": minilm_dir}.get(kind) or (
        sentencepiece_dirs[kind])
    files = directory if not tokenizer_json_only else os.path.join(directory, "source")
    os.makedirs(files, exist_ok=True)
    for name in os.listdir(source):
        if name.endswith((".txt", ".model")) or name in ("vocab.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(source, name), files)
    tokenizer_class = "BertTokenizer" if kind == "wordpiece" else task_class.replace(
        "ForSequenceClassification", "Tokenizer")
    tokenizer = getattr(transformers, tokenizer_class).from_pretrained(files)
    if tokenizer_json_only:
        tokenizer.save_pretrained(directory)
        shutil.rmtree(files)
        assert sorted(os.listdir(directory)) == ["tokenizer.json", "tokenizer_config.json"]
    sizes = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=37, num_labels=3)
    if family == "distilbert":
        sizes = dict(vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                     num_labels=3)
    elif family in ("albert", "electra"):
        sizes.update(embedding_size=16, pad_token_id=0)
    elif family != "bert":
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


def _texts(all_sotu_sentences):
    """Real sentences, accents, double spaces and a 120-character word ([UNK] in WordPiece)."""
    return [s for s in all_sotu_sentences[5000:5200] if len(s) < 120][:6] + [
        "Café déjà vu", "  two  spaces", "a " + "supercalifragilistic" * 6 + " word"]


def _assert_matches_transformers(ours, model, tokenizer, texts, what):
    """Our ids are the transformers tokenizer's, our encoder's last layer and our logits
    are the transformers model's."""
    import torch

    inputs = tokenizer(texts, padding="max_length", max_length=SEQUENCE_LENGTH,
                       truncation=True, return_tensors="pt")
    x = ours.preprocessor(texts)
    np.testing.assert_array_equal(to_numpy(x["token_ids"]), inputs["input_ids"].numpy(),
                                  err_msg=f"{what} token ids")
    inputs = {k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        expected = model(**inputs).logits.numpy()
        hidden = getattr(model, model.base_model_prefix)(**inputs).last_hidden_state.numpy()
    assert_all_close(to_numpy(ours.encoder(x)["sequence_output"]), hidden, rtol=1e-4,
                     atol=1e-5, what=f"{what} last hidden state")
    # Called, not `predict`: the same layers without compiling a predict step per family.
    assert_all_close(to_numpy(ours(x, training=False)), expected, rtol=1e-4, atol=1e-5,
                     what=f"{what} logits")


@pytest.mark.parametrize("family", FAMILY_FILES)
def test_raw_text_logits_match_transformers(family, byte_pair_dir, sentencepiece_dirs,
                                            all_sotu_sentences, tmp_path):
    model, tokenizer = _checkpoint(family, byte_pair_dir, sentencepiece_dirs, str(tmp_path))
    texts = _texts(all_sotu_sentences)
    ours = BertClassifier.from_preset(str(tmp_path), sequence_length=SEQUENCE_LENGTH)
    _assert_matches_transformers(ours, model, tokenizer, texts, family)
    # 9 texts in 3 batches of 3: one batch shape, one compiled training step
    history = ours.fit(texts, np.arange(len(texts)) % 3, batch_size=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.parametrize("family", list(CASES))
def test_transformers_5_directory_with_tokenizer_json_only(
        family, byte_pair_dir, sentencepiece_dirs, minilm_dir, all_sotu_sentences, tmp_path):
    """What transformers 5 saves (a fast tokenizer writes tokenizer.json and
    tokenizer_config.json only) loads as a task on raw text with transformers' ids and
    numbers; our save_huggingface of it loads back in transformers with AutoTokenizer's ids
    equal to ours."""
    import transformers

    directory = str(tmp_path / "theirs")
    model, tokenizer = _checkpoint(family, byte_pair_dir, sentencepiece_dirs, directory,
                                   minilm_dir, tokenizer_json_only=True)
    texts = _texts(all_sotu_sentences)
    ours = BertClassifier.from_preset(directory, sequence_length=SEQUENCE_LENGTH)
    _assert_matches_transformers(ours, model, tokenizer, texts, family)

    written = save_huggingface(ours, str(tmp_path / "ours"))
    back = transformers.AutoModelForSequenceClassification.from_pretrained(written).eval()
    _assert_matches_transformers(ours, back, transformers.AutoTokenizer.from_pretrained(written),
                                 texts, f"{family} written by save_huggingface")


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


def test_roberta_teacher_distils_into_a_smaller_student(byte_pair_dir, sentencepiece_dirs,
                                                        all_sotu_sentences, tmp_path):
    """A RoBERTa classifier from transformers teaches a 1-layer student of the same family
    (positions from the padding mask, the BPE tokenizer): the student starts from the
    teacher's layer and its distribution moves toward the teacher's on real sentences."""
    from keras_bert_suite.distillation import student_from_teacher
    from keras_bert_suite.text import BytePairTokenizer

    _checkpoint("roberta", byte_pair_dir, sentencepiece_dirs, str(tmp_path))
    teacher = BertClassifier.from_preset(str(tmp_path), sequence_length=SEQUENCE_LENGTH)
    student = student_from_teacher(teacher, num_layers=1)
    config = student.encoder.get_config()
    assert (config["num_layers"], config["position_offset"], config["num_segments"]) == (1, 2, 1)
    assert isinstance(student.preprocessor.tokenizer, BytePairTokenizer)
    assert_distils(teacher, student,
                   [s for s in all_sotu_sentences[9000:9400] if len(s) < 160][:48])


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
