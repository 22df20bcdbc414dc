"""CoNLL reading, and the token classifier's chunks (TokenClassifierPreprocessor) on the real
WNUT-16 tweets: labels at each word's first piece, long sentences in chunks, raw text."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.token_classifier import conll
from keras_bert_suite.tasks.token_classifier.postprocessor import per_sentence, word_tags
from keras_bert_suite.tasks.token_classifier.preprocessor import IGNORE_LABEL
from keras_bert_suite.tasks.token_classifier.preprocessor import TokenClassifierPreprocessor


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
def preprocessor(uncased_tokenizer):
    return TokenClassifierPreprocessor(uncased_tokenizer, sequence_length=128)


@pytest.fixture(scope="module")
def word_pieces(wnut, uncased_tokenizer):
    """Independent reference: every WNUT word tokenized alone (Python API), [UNK] for a word
    that tokenizes to nothing; one list of piece lists per sentence."""
    flat = uncased_tokenizer.encode_batch([w for s in wnut for w in s.words])
    flat = [ids or [uncased_tokenizer.unknown_token_id] for ids in flat]
    result, at = [], 0
    for sentence in wnut:
        result.append(flat[at:at + len(sentence.words)])
        at += len(sentence.words)
    return result


def _label_ids(sentences, labels):
    index = {tag: i for i, tag in enumerate(labels)}
    return [[index[t] for t in s.tags] for s in sentences]


def _expected_chunks(word_pieces, label_ids, sequence_length):
    """[CLS] + consecutive runs of sequence_length - 2 pieces + [SEP], padded; a word's label
    at its first piece. -> (token_ids, labels, sentence of each chunk) numpy."""
    chunk = sequence_length - 2
    token_rows, label_rows, owners = [], [], []
    for s, (words, labels) in enumerate(zip(word_pieces, label_ids)):
        pieces = [p for word in words for p in word]
        piece_labels = [label if i == 0 else IGNORE_LABEL
                        for word, label in zip(words, labels) for i in range(len(word))]
        for begin in range(0, max(len(pieces), 1), chunk):
            ids = [101] + pieces[begin:begin + chunk] + [102]
            row_labels = [IGNORE_LABEL] + piece_labels[begin:begin + chunk] + [IGNORE_LABEL]
            token_rows.append(ids + [0] * (sequence_length - len(ids)))
            label_rows.append(row_labels + [IGNORE_LABEL] * (sequence_length - len(ids)))
            owners.append(s)
    return np.array(token_rows), np.array(label_rows), np.array(owners)


@pytest.fixture(scope="module")
def wnut_chunks(preprocessor, wnut, wnut_labels):
    return preprocessor.chunks([list(s.words) for s in wnut],
                               labels=_label_ids(wnut, wnut_labels))


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


@pytest.mark.needs_tf_graph
def test_unknown_tag_names_file_line_and_known_tags(tmp_path, preprocessor):
    path = _write(tmp_path, "Peter\tB-PER\n\nParis\tO\nagain\tB-LOC\n")
    message = r"data.txt:4: unknown tag 'B-LOC'; the known tags are \['O', 'B-PER'\]"
    with pytest.raises(ValueError, match=message):
        conll.check_labels(conll.read_conll(path), ["O", "B-PER"])
    with pytest.raises(ValueError, match=message):
        conll.training_dataset(preprocessor, conll.read_conll(path), ["O", "B-PER"])


# === chunks ===

def test_ignore_label_matches_the_token_classifier_loss():
    from keras_bert_suite.training import losses

    assert IGNORE_LABEL == losses.IGNORE_LABEL == -100


@pytest.mark.needs_tf_graph
def test_labels_sit_on_each_word_first_piece(wnut, wnut_chunks, word_pieces, wnut_labels):
    label_ids = _label_ids(wnut, wnut_labels)
    token_ids, labels, owners = _expected_chunks(word_pieces, label_ids, 128)
    assert len(token_ids) == len(wnut) == 2394  # no tweet needs a second chunk at 128
    np.testing.assert_array_equal(wnut_chunks.inputs["token_ids"], token_ids)
    np.testing.assert_array_equal(wnut_chunks.labels, labels)
    np.testing.assert_array_equal(wnut_chunks.inputs["padding_mask"], token_ids != 0)
    assert not np.asarray(wnut_chunks.inputs["segment_ids"]).any()
    labelled = labels != IGNORE_LABEL
    np.testing.assert_array_equal(labelled.sum(1), [len(s.words) for s in wnut])
    assert [wnut_labels[i] for i in labels[0][labelled[0]]] == list(wnut[0].tags)
    # Where every piece sits, and which pieces start a word.
    chunk, position = np.asarray(wnut_chunks.piece_chunk), np.asarray(wnut_chunks.piece_position)
    first = np.asarray(wnut_chunks.first_piece)
    flat = [p for words in word_pieces for word in words for p in word]
    np.testing.assert_array_equal(token_ids[chunk, position], flat)
    np.testing.assert_array_equal(labelled[chunk, position], first)
    assert labelled.sum() == first.sum() == len(np.asarray(wnut_chunks.word_row))
    np.testing.assert_array_equal(wnut_chunks.num_words, [len(s.words) for s in wnut])
    assert wnut_chunks.words is None  # pre-split: the caller has the words


@pytest.mark.needs_tf_graph
def test_token_ids_match_transformers(minilm_dir, wnut, wnut_chunks):
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    encoded = reference([list(s.words) for s in wnut], is_split_into_words=True,
                        padding="max_length", max_length=128)
    # Hugging Face gives a word that tokenizes to nothing no piece (we give it [UNK], see
    # below); WNUT-16 has no such word, so every row is the same.
    token_ids = np.asarray(wnut_chunks.inputs["token_ids"])
    np.testing.assert_array_equal(token_ids, encoded["input_ids"])
    np.testing.assert_array_equal(wnut_chunks.inputs["padding_mask"], encoded["attention_mask"])
    labelled = np.asarray(wnut_chunks.labels) != IGNORE_LABEL
    for s in range(len(wnut)):
        word_ids = encoded.word_ids(s)
        starts = [i > 0 and w is not None and w != word_ids[i - 1]
                  for i, w in enumerate(word_ids)]
        np.testing.assert_array_equal(labelled[s], starts)


@pytest.mark.needs_tf_graph
def test_a_word_that_tokenizes_to_nothing_becomes_unk(uncased_tokenizer, minilm_dir):
    # U+200B (a format character) and BEL (a control character) are dropped by BERT's
    # cleaning; a lone combining accent is stripped by the uncased normalization; "" is empty.
    words = ["Paris", "\u200b", "\x07", "\u0301", "", "rocks"]
    preprocessor = TokenClassifierPreprocessor(uncased_tokenizer, sequence_length=16)
    chunks = preprocessor.chunks([words], labels=[[1, 0, 1, 2, 2, 0]])
    unk = uncased_tokenizer.unknown_token_id
    assert chunks.inputs["token_ids"][0, :8].tolist() == [101, 3000, unk, unk, unk, unk, 5749,
                                                          102]
    assert np.asarray(chunks.labels)[0, :8].tolist() == [-100, 1, 0, 1, 2, 2, 0, -100]
    assert np.asarray(chunks.num_words).tolist() == [6]
    # Hugging Face gives those words no position at all (the documented difference).
    transformers = pytest.importorskip("transformers")
    encoded = transformers.BertTokenizerFast.from_pretrained(minilm_dir)(
        [w for w in words if w], is_split_into_words=True)
    assert encoded.word_ids() == [None, 0, 4, None]


@pytest.mark.needs_tf_graph
def test_long_sentences_are_cut_into_consecutive_chunks(wnut, word_pieces, uncased_tokenizer,
                                                        wnut_labels):
    preprocessor = TokenClassifierPreprocessor(uncased_tokenizer, sequence_length=8)
    label_ids = _label_ids(wnut, wnut_labels)
    chunks = preprocessor.chunks([list(s.words) for s in wnut], labels=label_ids)
    token_ids, labels, owners = _expected_chunks(word_pieces, label_ids, 8)
    np.testing.assert_array_equal(chunks.inputs["token_ids"], token_ids)
    np.testing.assert_array_equal(chunks.labels, labels)
    assert len(token_ids) > 4 * len(wnut)  # many tweets need several chunks
    # Every chunk but a sentence's last holds exactly 6 = sequence_length - 2 pieces, and the
    # chunks of a sentence hold its pieces in order, every word's label exactly once.
    mask = np.asarray(chunks.inputs["padding_mask"])
    for s in (0, 1, 500, 2393):
        rows = np.flatnonzero(owners == s)
        np.testing.assert_array_equal(rows, np.arange(rows[0], rows[-1] + 1))
        assert (mask[rows[:-1]].sum(1) == 8).all() and 3 <= mask[rows[-1]].sum() <= 8
        pieces = np.concatenate([token_ids[r][1:mask[r].sum() - 1] for r in rows])
        np.testing.assert_array_equal(pieces, [p for word in word_pieces[s] for p in word])
        row_labels = np.concatenate([labels[r] for r in rows])
        np.testing.assert_array_equal(row_labels[row_labels != IGNORE_LABEL], label_ids[s])
    # A word longer than a chunk goes on in the next chunk (its label stays on the first).
    one = preprocessor.chunks([["to", "a-b-c-d-e", "x"]], labels=[[0, 1, 0]])
    a, b, c, d, e, hyphen, to, x = (uncased_tokenizer.token_to_id(t)
                                    for t in ("a", "b", "c", "d", "e", "-", "to", "x"))
    assert one.inputs["token_ids"].tolist() == [[101, to, a, hyphen, b, hyphen, c, 102],
                                                [101, hyphen, d, hyphen, e, x, 102, 0]]
    assert np.asarray(one.labels).tolist() == [[-100, 0, 1, -100, -100, -100, -100, -100],
                                   [-100, -100, -100, -100, -100, 0, -100, -100]]


@pytest.mark.needs_tf_graph
def test_word_tags_read_each_word_first_piece(wnut, wnut_chunks, wnut_labels):
    logits = np.random.default_rng(0).normal(
        size=(*wnut_chunks.inputs["token_ids"].shape, len(wnut_labels))).astype(np.float32)
    tag_ids, scores = word_tags(wnut_chunks, logits)
    labelled = np.asarray(wnut_chunks.labels) != IGNORE_LABEL
    np.testing.assert_array_equal(tag_ids, logits.argmax(-1)[labelled])
    probabilities = np.exp(logits[labelled]) / np.exp(logits[labelled]).sum(-1, keepdims=True)
    np.testing.assert_allclose(scores, probabilities.max(-1), rtol=1e-5, atol=1e-7)
    padded = np.asarray(per_sentence(tag_ids, wnut_chunks, -1))
    assert padded.shape == (len(wnut), max(len(s.words) for s in wnut))
    assert [len(row[row >= 0]) for row in padded] == [len(s.words) for s in wnut]


@pytest.mark.needs_tf_graph
def test_training_dataset_yields_every_chunk(wnut, wnut_chunks, preprocessor, wnut_labels):
    dataset, count = conll.training_dataset(preprocessor, wnut, wnut_labels, batch_size=32,
                                            shuffle=False)
    assert count == len(wnut_chunks.labels) == 2394
    x, y = next(iter(dataset))
    assert sorted(x) == ["padding_mask", "segment_ids", "token_ids"]
    assert y.shape == (32, 128) and y.dtype.name == "int32"
    np.testing.assert_array_equal(x["token_ids"].numpy(), wnut_chunks.inputs["token_ids"][:32])
    np.testing.assert_array_equal(y.numpy(), wnut_chunks.labels[:32])
    short = TokenClassifierPreprocessor(preprocessor.tokenizer, sequence_length=8)
    _, short_count = conll.training_dataset(short, wnut[:100], wnut_labels, shuffle=False)
    assert short_count == len(short.chunks([list(s.words) for s in wnut[:100]]).inputs[
        "token_ids"]) > 400
    shuffled, _ = conll.training_dataset(preprocessor, wnut, wnut_labels, batch_size=4096,
                                         seed=1)
    _, all_labels = next(iter(shuffled))
    assert sorted(all_labels.numpy().sum(1)) == sorted(np.asarray(wnut_chunks.labels).sum(1))


@pytest.mark.needs_tf_graph
def test_pre_split_words_as_ragged_or_padded_tensors(wnut, wnut_chunks, preprocessor):
    words = [list(s.words) for s in wnut[:40]]
    ragged = preprocessor.chunks(tf.ragged.constant(words))
    padded = preprocessor.chunks(tf.ragged.constant(words).to_tensor(""))  # "" = padding
    for chunks in (ragged, padded):
        np.testing.assert_array_equal(chunks.inputs["token_ids"],
                                      wnut_chunks.inputs["token_ids"][:40])
        assert chunks.labels is None
    # In tf.data (graph mode), on ragged batches of words and labels.
    index = {t: i for i, t in enumerate(conll.learn_labels(wnut))}
    label_ids = tf.ragged.constant([[index[t] for t in s.tags] for s in wnut[:40]])
    mapped = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), label_ids))
    batches = list(mapped.ragged_batch(16).map(preprocessor).as_numpy_iterator())
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]),
                                  wnut_chunks.labels[:40])


def _python_words(tokenizer, texts):
    """Independent word split from the Python API: a word starts at every piece that is not
    "##...", and spans its pieces' character offsets."""
    vocabulary = tokenizer.get_vocabulary()
    ids, offsets = tokenizer.encode_batch_with_offsets(texts)
    words = []
    for text, row_ids, row_offsets in zip(texts, ids, offsets):
        row = []
        for i, (piece, (begin, end)) in enumerate(zip(row_ids, row_offsets)):
            if i == 0 or not vocabulary[piece].startswith("##"):
                row.append([begin, end])
            else:
                row[-1][1] = end
        words.append([text[b:e] for b, e in row])
    return words


@pytest.mark.needs_tf_graph
def test_raw_text_gives_the_tokenizer_words(wnut, uncased_tokenizer, preprocessor):
    texts = [" ".join(s.words) for s in wnut[:200]] + [
        "Café naïve 東京! don't", "", "  \u200b "]
    chunks = preprocessor.chunks(texts)
    expected = _python_words(uncased_tokenizer, texts)
    words = [w.decode("utf-8") for w in np.asarray(chunks.words)]
    rows = np.asarray(chunks.word_row)
    assert [[w for w, r in zip(words, rows) if r == b] for b in range(len(texts))] == expected
    assert expected[200] == ["Café", "naïve", "東", "京", "!", "don", "'", "t"]
    assert expected[201] == expected[202] == []
    np.testing.assert_array_equal(chunks.num_words, [len(w) for w in expected])
    # Every word is the text's own substring, in order (cased and accented as written).
    for b in (0, 7, 200):
        at = 0
        for word in expected[b]:
            at = texts[b].index(word, at) + len(word)
    assert np.asarray(chunks.first_piece).sum() == len(words)
    assert chunks.inputs["token_ids"].shape == (203, 128)


@pytest.mark.needs_tf_graph
def test_chunk_errors(uncased_tokenizer, preprocessor):
    with pytest.raises(ValueError, match="Labels need pre-split words"):
        preprocessor.chunks(["Paris rocks"], labels=[[1, 0]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Give one label per word"):
        preprocessor.chunks([["Paris", "rocks"]], labels=[[1]])
    with pytest.raises(ValueError, match="sentence-level sample_weight|sample_weight is not"):
        preprocessor([["Paris"]], [[1]], [1.0])
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3"):
        TokenClassifierPreprocessor(uncased_tokenizer, sequence_length=2)
    with pytest.raises(ValueError, match="tokenizer must be a BertTokenizer"):
        TokenClassifierPreprocessor(None)
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        conll.TaggedSentence(("a", "b"), ("O",))
