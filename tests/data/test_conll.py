"""CoNLL reading, WordPiece alignment and windowing, on the real WNUT-16 tweets."""

import collections

import numpy as np
import pytest

from keras_bert_suite.tasks.token_classifier import conll
from keras_bert_suite.data import corpora

pytestmark = pytest.mark.backend_independent


@pytest.fixture(scope="module")
def wnut_path():
    return corpora.fetch_wnut16()


@pytest.fixture(scope="module")
def wnut(wnut_path):
    return conll.read_conll(wnut_path)


@pytest.fixture(scope="module")
def wnut_labels(wnut):
    return conll.learn_labels(wnut)


@pytest.fixture(scope="module")
def aligner(uncased_tokenizer, wnut_labels):
    return conll.WordPieceAligner(uncased_tokenizer, wnut_labels, sequence_length=128)


@pytest.fixture(scope="module")
def wnut_windows(aligner, wnut):
    return aligner.encode(wnut)


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


# === reading ===

def test_reads_wnut16_sentences_words_and_tags(wnut, wnut_path):
    assert len(wnut) == 2394
    assert sum(len(s.words) for s in wnut) == 46469
    first = wnut[0]
    assert first.words[:3] == ("@paulwalk", "It", "'s")
    assert first.words[14:17] == ("Empire", "State", "Building")
    assert first.tags[14:17] == ("B-facility", "I-facility", "I-facility")
    assert (first.source, first.line) == (wnut_path, 1)
    assert wnut[1].line == len(first.words) + 2  # after the blank line
    tags = collections.Counter(tag for s in wnut for tag in s.tags)
    assert tags["O"] == 44007 and tags["B-person"] == 449 and tags["I-other"] == 320
    assert max(len(s.words) for s in wnut) == 39


def test_labels_are_learned_in_a_stable_order(wnut, wnut_labels):
    assert len(wnut_labels) == 21
    assert wnut_labels[:5] == ["O", "B-company", "I-company", "B-facility", "I-facility"]
    assert wnut_labels[-2:] == ["B-tvshow", "I-tvshow"]
    assert conll.learn_labels(wnut[::-1]) == wnut_labels


def test_docstart_space_separated_columns_and_tag_column(tmp_path):
    path = _write(tmp_path, "-DOCSTART- -X- O O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
                            "\n-DOCSTART- -X- O O\nPeter NNP B-NP B-PER\n\n\n")
    sentences = conll.read_conll(path)
    assert [s.words for s in sentences] == [("EU", "rejects"), ("Peter",)]
    assert [s.tags for s in sentences] == [("B-ORG", "O"), ("B-PER",)]
    assert [s.line for s in sentences] == [3, 7]
    chunks = conll.read_conll(path, tag_column=2)
    assert chunks[0].tags == ("B-NP", "B-VP")


def test_iob1_tags_are_read_as_they_are(tmp_path):
    path = _write(tmp_path, "Peter\tI-PER\nBlackburn\tI-PER\nvisits\tO\n")
    assert conll.read_conll(path)[0].tags == ("I-PER", "I-PER", "O")


@pytest.mark.parametrize("text, message", [
    ("Peter\tB-PER\nvisits\tO\textra\n", r"data.txt:2: 3 columns, but the file's first word line has 2"),
    ("Peter\tB-PER\n\nvisits\n", r"data.txt:3: 1 columns, but the file's first word line has 2"),
    ("Peter\n", r"data.txt:1: expected a word and a tag"),
    ("Peter\tB_PER\n", r"data.txt:1: tag 'B_PER' is neither 'O' nor PREFIX-TYPE"),
    ("Peter\tNNP\n", r"data.txt:1: tag 'NNP'.*check tag_column"),
    ("\n\n-DOCSTART-\tO\n\n", r"data.txt has no tagged words"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        conll.read_conll(_write(tmp_path, text))


def test_bad_tag_column_invalid_utf8_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"tag_column=0 does not name a tag column"):
        conll.read_conll(_write(tmp_path, "Peter\tB-PER\n"), tag_column=0)
    with pytest.raises(ValueError, match=r"tag_column=5"):
        conll.read_conll(_write(tmp_path, "Peter\tB-PER\n"), tag_column=5)
    with pytest.raises(ValueError, match=r"data.txt:2: not valid UTF-8"):
        conll.read_conll(_write(tmp_path, b"Peter\tB-PER\nCaf\xe9\tO\n"))
    with pytest.raises(FileNotFoundError, match=r"missing.txt does not exist"):
        conll.read_conll(str(tmp_path / "missing.txt"))


def test_unknown_tag_names_file_line_and_known_tags(tmp_path, uncased_tokenizer):
    path = _write(tmp_path, "Peter\tB-PER\n\nParis\tO\nagain\tB-LOC\n")
    aligner = conll.WordPieceAligner(uncased_tokenizer, ["O", "B-PER"], sequence_length=16)
    with pytest.raises(ValueError, match=r"data.txt:4: unknown tag 'B-LOC'; the known tags are "
                                         r"\['O', 'B-PER'\]"):
        aligner.encode(conll.read_conll(path))


# === alignment ===

def test_ignore_label_matches_the_token_classifier_loss():
    from keras_bert_suite.models import token_losses

    assert conll.IGNORE_LABEL == token_losses.IGNORE_LABEL == -100


def test_every_wnut_word_is_labelled_once_and_round_trips(wnut, wnut_windows, aligner, wnut_labels):
    windows = wnut_windows
    assert windows.token_ids.shape == (2394, 128)  # no tweet needs a second window at 128
    labelled = windows.label_ids != conll.IGNORE_LABEL
    np.testing.assert_array_equal(labelled, windows.first_piece_mask())
    np.testing.assert_array_equal(labelled.sum(1), [len(s.words) for s in wnut])
    assert aligner.gold_tags(windows) == [list(s.tags) for s in wnut]
    # The label at a word's first piece is that word's tag.
    first_sentence = windows.label_ids[0][labelled[0]]
    assert [wnut_labels[i] for i in first_sentence] == list(wnut[0].tags)
    # Special tokens and padding: ignored, word id -1.
    lengths = windows.padding_mask.sum(1)
    rows = np.arange(len(lengths))
    assert (windows.token_ids[:, 0] == 101).all()
    assert (windows.token_ids[rows, lengths - 1] == 102).all()
    assert (windows.word_ids[:, 0] == -1).all() and (windows.word_ids[rows, lengths - 1] == -1).all()
    assert (windows.label_ids[windows.padding_mask == 0] == conll.IGNORE_LABEL).all()
    assert (windows.token_ids[windows.padding_mask == 0] == 0).all()
    assert (windows.segment_ids == 0).all()


def test_word_ids_and_token_ids_match_transformers(minilm_dir, wnut, wnut_windows):
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    encoded = reference([list(s.words) for s in wnut], is_split_into_words=True,
                        padding="max_length", max_length=128)
    np.testing.assert_array_equal(wnut_windows.token_ids, encoded["input_ids"])
    np.testing.assert_array_equal(wnut_windows.padding_mask, encoded["attention_mask"])
    word_ids = [[-1 if w is None else w for w in encoded.word_ids(i)] for i in range(len(wnut))]
    np.testing.assert_array_equal(wnut_windows.word_ids, word_ids)


def test_a_word_that_tokenizes_to_nothing_becomes_unk(uncased_tokenizer, minilm_dir):
    # U+200B (a format character) and BEL (a control character) are dropped by BERT's
    # cleaning; a lone combining accent is stripped by the uncased normalization.
    words = ("Paris", "\u200b", "\x07", "\u0301", "rocks")
    sentence = conll.TaggedSentence(words, ("B-LOC", "O", "B-LOC", "I-LOC", "O"))
    aligner = conll.WordPieceAligner(uncased_tokenizer, ["O", "B-LOC", "I-LOC"], 16)
    windows = aligner.encode([sentence])
    unk = uncased_tokenizer.unknown_token_id
    assert windows.token_ids[0, :7].tolist() == [101, 3000, unk, unk, unk, 5749, 102]
    assert windows.word_ids[0, :7].tolist() == [-1, 0, 1, 2, 3, 4, -1]
    assert windows.label_ids[0, :7].tolist() == [-100, 1, 0, 1, 2, 0, -100]
    assert aligner.gold_tags(windows) == [list(sentence.tags)]
    # Hugging Face gives those words no position at all (the documented difference).
    transformers = pytest.importorskip("transformers")
    encoded = transformers.BertTokenizerFast.from_pretrained(minilm_dir)(
        list(words), is_split_into_words=True)
    assert encoded.word_ids() == [None, 0, 4, None]


def test_long_sentences_are_split_at_word_boundaries(wnut, wnut_windows, uncased_tokenizer,
                                                     wnut_labels):
    aligner = conll.WordPieceAligner(uncased_tokenizer, wnut_labels, sequence_length=8)
    windows = aligner.encode(wnut)
    assert len(windows.token_ids) > 4 * len(wnut)  # many tweets need several windows
    assert windows.padding_mask.sum(1).max() <= 8
    assert aligner.gold_tags(windows) == [list(s.tags) for s in wnut]
    # Each sentence's windows are consecutive, cover its words in order, each word once,
    # and together hold the pieces of the one-window encoding, except that a word of more
    # than 6 pieces (URLs) keeps its first 6.
    first = windows.first_piece_mask()
    for s in (0, 1, 500, 2393):
        rows = np.flatnonzero(windows.sentence_index == s)
        np.testing.assert_array_equal(rows, np.arange(rows[0], rows[-1] + 1))
        words = np.concatenate([windows.word_ids[r][first[r]] for r in rows])
        np.testing.assert_array_equal(words, np.arange(len(wnut[s].words)))
        pieces = np.concatenate([windows.token_ids[r][windows.word_ids[r] >= 0] for r in rows])
        whole = wnut_windows.token_ids[s]
        expected = [whole[wnut_windows.word_ids[s] == w][:6] for w in range(len(wnut[s].words))]
        np.testing.assert_array_equal(pieces, np.concatenate(expected))
    assert sum(len(p) > 6 for p in aligner.word_pieces(wnut[1].words)) == 1  # its URL


def test_a_word_longer_than_a_window_keeps_its_first_pieces(uncased_tokenizer):
    sentence = conll.TaggedSentence(("to", "a-b-c-d", "x"), ("O", "B-X", "O"))
    aligner = conll.WordPieceAligner(uncased_tokenizer, ["O", "B-X"], sequence_length=5)
    windows = aligner.encode([sentence])
    a, b, hyphen = (uncased_tokenizer.token_to_id(t) for t in ("a", "b", "-"))
    assert windows.token_ids[:, :5].tolist() == [
        [101, uncased_tokenizer.token_to_id("to"), 102, 0, 0],
        [101, a, hyphen, b, 102],
        [101, uncased_tokenizer.token_to_id("x"), 102, 0, 0]]
    assert aligner.gold_tags(windows) == [["O", "B-X", "O"]]


def test_decode_maps_predictions_back_to_words(wnut, wnut_windows, aligner, wnut_labels):
    logits = np.random.default_rng(0).normal(size=(*wnut_windows.token_ids.shape, len(wnut_labels)))
    tags = aligner.decode(wnut_windows, logits)
    assert [len(t) for t in tags] == [len(s.words) for s in wnut]
    first = wnut_windows.first_piece_mask()
    expected = logits.argmax(-1)[first]
    assert [wnut_labels.index(t) for sentence in tags for t in sentence] == expected.tolist()
    assert aligner.decode(wnut_windows, logits.argmax(-1)) == tags
    with pytest.raises(ValueError, match=r"predictions have shape \(3, 128\); expected \(2394, 128\)"):
        aligner.decode(wnut_windows, np.zeros((3, 128), np.int32))
    with pytest.raises(ValueError, match=r"label ids must be in \[0, 21\)"):
        aligner.decode(wnut_windows, np.full((2394, 128), 21))


def test_to_dataset_yields_encoder_inputs_and_labels(wnut_windows):
    ds = conll.to_dataset(wnut_windows, batch_size=32)
    x, y = next(iter(ds))
    assert sorted(x) == ["padding_mask", "segment_ids", "token_ids"]
    assert y.shape == (32, 128) and y.dtype.name == "int32"
    np.testing.assert_array_equal(x["token_ids"].numpy(), wnut_windows.token_ids[:32])
    np.testing.assert_array_equal(y.numpy(), wnut_windows.label_ids[:32])
    shuffled = conll.to_dataset(wnut_windows, batch_size=4096, shuffle=True, seed=1)
    _, all_labels = next(iter(shuffled))
    assert sorted(all_labels.numpy().sum(1)) == sorted(wnut_windows.label_ids.sum(1))


def test_aligner_argument_errors(uncased_tokenizer):
    with pytest.raises(ValueError, match="distinct tags"):
        conll.WordPieceAligner(uncased_tokenizer, ["O", "O"])
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3"):
        conll.WordPieceAligner(uncased_tokenizer, ["O"], sequence_length=2)
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        conll.TaggedSentence(("a", "b"), ("O",))
