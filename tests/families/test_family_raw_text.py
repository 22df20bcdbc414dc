"""A family checkpoint as transformers saves it, tokenizer files included, is a task on raw
text: `BertClassifier.from_preset(directory)` picks the family's tokenizer (byte-level BPE,
SentencePiece) and packing, and its logits on real sentences are transformers' logits on
the same strings through transformers' own tokenizer; it trains on raw text too."""

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
