"""KerasHub presets of RoBERTa, ALBERT and XLM-R carry their tokenizers, both ways, on
tokenizers learned from the State of the Union corpus: save_keras_hub of our classifier (built
from a transformers directory with those files) writes KerasHub's RobertaTokenizer /
AlbertTokenizer / XLMRobertaTokenizer, which split 200 real sentences into our ids, and our
from_preset of that preset gives back our tokenizer and our logits on raw text; KerasHub's
TextClassifier on the same raw text gives them too.

KerasHub's AlbertTokenizer runs the proto without ALBERT's lower-casing and accent stripping:
its ids are ours on text already normalized so, not on the raw sentences (pinned below, so
that a KerasHub that starts to normalize shows here)."""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import BertClassifier, save_keras_hub
from keras_bert_suite.text.byte_pair_tokenizer import BytePairTokenizer
from keras_bert_suite.text.sentencepiece_tokenizer import SentencePieceTokenizer
from tests.conftest import albert_prenormalized, to_numpy
from tests.families.test_family_raw_text import SEQUENCE_LENGTH, _checkpoint
from tests.numerics import assert_close

keras_hub = pytest.importorskip("keras_hub")

pytestmark = pytest.mark.real

# transformers family (test_family_raw_text.CASES) -> (KerasHub's tokenizer, our style or None)
FAMILIES = {"roberta": ("RobertaTokenizer", None),
            "albert": ("AlbertTokenizer", "albert"),
            "xlm-roberta": ("XLMRobertaTokenizer", "xlm_roberta")}
# Our classifier against itself read back: the same weights and ids, float32 rounding only.
# KerasHub's TextClassifier: the same math in another implementation (test_keras_hub_families'
# SAME_MATH_RTOL); a wrong id or position row moves logits by 1e-2 or more.
RTOL, ATOL_OF_SCALE = 1e-4, 1e-5


def _texts(all_sotu_sentences):
    """200 real sentences from across the corpus (short ones: the classifier's 40 tokens
    hold them whole, so truncation plays no part), and a few with accents and spaces."""
    short = [s for s in all_sotu_sentences[1000::97] if len(s) < 160][:196]
    return short + ["Café déjà vu: a résumé.", "  two  spaces", "Straße ÅNGSTRÖM ﬁne",
                    "Tabs\tand\nnew lines"]


@pytest.fixture(scope="module", params=list(FAMILIES))
def exported(request, byte_pair_dir, sentencepiece_dirs, tmp_path_factory):
    """(family, our classifier on the family's tokenizer, the KerasHub preset we wrote)."""
    family = request.param
    source = tmp_path_factory.mktemp(f"{family}_transformers")
    _checkpoint(family, byte_pair_dir, sentencepiece_dirs, str(source))
    ours = BertClassifier.from_preset(str(source), sequence_length=SEQUENCE_LENGTH)
    path = save_keras_hub(ours, tmp_path_factory.mktemp(f"{family}_keras_hub"))
    return family, ours, path


def _ids(tokenizer, texts):
    return [np.asarray(ids).tolist() for ids in tokenizer(texts)]


@pytest.mark.needs_tf_graph
def test_keras_hub_tokenizer_gives_our_ids(exported, all_sotu_sentences):
    family, ours, path = exported
    class_name, style = FAMILIES[family]
    with open(os.path.join(path, "tokenizer.json")) as f:
        assert json.load(f)["class_name"] == class_name
    tokenizer = ours.preprocessor.tokenizer
    theirs = getattr(keras_hub.models, class_name).from_preset(path)
    texts = _texts(all_sotu_sentences)
    expected = tokenizer.encode_batch(texts)
    if style == "albert":
        assert sum(a != b for a, b in zip(_ids(theirs, texts), expected)) > 150
        texts = [albert_prenormalized(text) for text in texts]
    assert _ids(theirs, texts) == expected
    assert theirs.vocabulary_size() == tokenizer.vocabulary_size()
    assert list(theirs.get_vocabulary()) == tokenizer.get_vocabulary()
    if style is None:  # the same vocabulary and merges, the same model proto
        assert list(theirs.merges) == list(tokenizer.merges)
    else:
        assert open(os.path.join(path, "assets", "tokenizer", "vocabulary.spm"),
                    "rb").read() == tokenizer.proto


def test_our_from_preset_reads_keras_hub_tokenizer_back(exported, all_sotu_sentences):
    family, ours, path = exported
    style = FAMILIES[family][1]
    back = BertClassifier.from_preset(path, sequence_length=SEQUENCE_LENGTH)
    tokenizer = back.preprocessor.tokenizer
    assert type(tokenizer) is (BytePairTokenizer if style is None else SentencePieceTokenizer)
    assert getattr(tokenizer, "style", None) == style
    texts = _texts(all_sotu_sentences)
    assert tokenizer.encode_batch(texts) == ours.preprocessor.tokenizer.encode_batch(texts)
    texts = texts[:46] + texts[-4:]  # logits on 50 of them, in one batch
    logits = ours.predict(texts, batch_size=len(texts), verbose=0)
    scale = np.abs(logits).max()
    assert_close(back.predict(texts, batch_size=len(texts), verbose=0), logits, rtol=RTOL,
                 atol=ATOL_OF_SCALE * scale)

    # KerasHub's own classifier, its preprocessor then its model, on the same raw text. Called
    # eagerly: `predict` computes the same (2e-6 apart) but traces the preprocessor's BPE
    # graph and the model first, 5-7 s of CPU per backend.
    task = getattr(keras_hub.models, FAMILIES[family][0].replace("Tokenizer", "TextClassifier"))
    theirs = task.from_preset(path)
    their_texts = [albert_prenormalized(t) for t in texts] if style == "albert" else texts
    their_logits = theirs(theirs.preprocessor(their_texts), training=False)
    assert_close(to_numpy(their_logits), logits, rtol=RTOL, atol=ATOL_OF_SCALE * scale)


def test_albert_preset_warns_that_keras_hub_does_not_lower_case(exported, tmp_path, caplog):
    family, ours, _ = exported
    if family != "albert":
        return
    save_keras_hub(ours.encoder, tmp_path / "encoder", vocabulary=ours.preprocessor.tokenizer)
    assert "AlbertTokenizer runs the SentencePiece model without ALBERT's lower-casing" \
        in caplog.text
    assert keras_hub.models.AlbertTokenizer.from_preset(str(tmp_path / "encoder")).proto == (
        ours.preprocessor.tokenizer.proto)
