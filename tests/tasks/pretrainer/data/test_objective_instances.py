"""The family's pretraining data against the papers' definitions, on real text (State of the
Union addresses): ALBERT's sentence-order pairs are consecutive and swapped half the time,
RoBERTa's DOC-SENTENCES never cross a document and FULL-SENTENCES do (with a [SEP]) while
no token is lost, ALBERT's n-gram masking draws n with p(n) ~ 1/n over whole words, and the
left-to-right LM's targets are exactly the next tokens."""

import random

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data.documents import read_documents
from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import DynamicMasker
from keras_bert_suite.tasks.pretrainer.data.instances import (
    create_pretraining_instances, instances_from_token_documents, masking_config,
    tokenize_documents)
from keras_bert_suite.tasks.pretrainer.data.next_token import NextTokenTargets
from keras_bert_suite.text import BertTokenizer

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_preset("minilm_l6_h384_uncased")


@pytest.fixture(scope="module")
def documents(sotu_files, tokenizer):
    """Tokenized documents: 8 addresses, each a document of sentences."""
    return tokenize_documents(read_documents(sotu_files[:8], layout="paragraph_per_line"),
                              tokenizer)


def _find(haystack, needle):
    """The token index where `needle` occurs in `haystack`, or -1."""
    text, part = ",".join(map(str, haystack)), ",".join(map(str, needle))
    at = f",{text},".find(f",{part},")
    return -1 if at < 0 else f",{text},"[:at + 1].count(",") - 1


def _contains(haystack, needle):
    return _find(haystack, needle) >= 0


def _segments(instance):
    ids, segments = instance.token_ids, instance.segment_ids
    a = [t for t, s in zip(ids[1:], segments[1:]) if s == 0][:-1]  # drop A's [SEP]
    b = [t for t, s in zip(ids, segments) if s == 1][:-1]
    return a, b


def test_sentence_order_pairs_are_consecutive_and_swapped_half_the_time(documents, tokenizer):
    config = masking_config(tokenizer)
    instances = list(instances_from_token_documents(
        [list(d) for d in documents], random.Random(7), config, sequence_length=128,
        dupe_factor=3, short_seq_prob=0.0, instance_format="sop", static_masking=False))
    streams = [[t for sentence in d for t in sentence] for d in documents]
    checked = swapped = 0
    for instance in instances:
        a, b = _segments(instance)
        assert a and b
        first, second = (b, a) if instance.is_random_next else (a, b)
        # Both from one address, the second right after the first (up to the tokens that
        # trimming the pair to 125 took from the first's end and the second's start).
        found = [(_find(s, first), _find(s, second)) for s in streams]
        assert any(0 <= f and f + len(first) <= g <= f + len(first) + 125 for f, g in found)
        checked += 1
        swapped += instance.is_random_next
    assert checked > 300
    # Binomial(n, 0.5): within 4 standard deviations.
    assert abs(swapped - checked / 2) < 4 * np.sqrt(checked / 4), (swapped, checked)


@pytest.mark.parametrize("instance_format", ["doc_sentences", "full_sentences"])
def test_roberta_instances_keep_every_token_and_cross_documents_only_in_full_sentences(
        documents, tokenizer, instance_format):
    config = masking_config(tokenizer)
    shuffled = [list(d) for d in documents]
    instances = list(instances_from_token_documents(
        shuffled, random.Random(3), config, sequence_length=256, dupe_factor=1,
        instance_format=instance_format, static_masking=False))
    sep = tokenizer.sep_token_id
    bodies = [i.token_ids[1:-1] for i in instances]  # without [CLS] ... [SEP]
    assert all(len(i.token_ids) <= 256 and not any(i.segment_ids) for i in instances)
    read = [t for body in bodies for t in body if t != sep]
    assert read == [t for d in shuffled for sentence in d for t in sentence]  # none lost
    streams = [[t for sentence in d for t in sentence] for d in shuffled]
    crossing = [body for body in bodies if sep in body]
    if instance_format == "doc_sentences":
        assert not crossing
        assert all(any(_contains(s, body) for s in streams) for body in bodies)
    else:
        # Documents run on (a [SEP] between two), except where one ended an instance.
        assert 1 <= len(crossing) <= len(shuffled) - 1
        assert sum(len(b) for b in bodies) / len(bodies) > 0.85 * 254  # packed full


def test_an_unknown_instance_format_is_refused(tokenizer):
    with pytest.raises(ValueError, match="instance_format must be one of nsp, sop"):
        create_pretraining_instances([["a b ."], ["c d ."]], tokenizer, instance_format="xx")


def _rows(documents, tokenizer, num_rows, length=64):
    """[CLS] x [SEP] rows of the documents' text, the last few shorter (padded)."""
    stream = [t for d in documents for s in d for t in s]
    rows = np.zeros((num_rows, length), "int32")
    mask = np.zeros_like(rows)
    for i in range(num_rows):
        body = stream[i * length:(i + 1) * length][:length - 2 - (i % 3) * 10]
        ids = [tokenizer.cls_token_id, *body, tokenizer.sep_token_id]
        rows[i, :len(ids)], mask[i, :len(ids)] = ids, 1
    return rows, mask


def test_ngram_masking_masks_whole_word_ngrams_with_albert_lengths(documents, tokenizer):
    rows, mask = _rows(documents, tokenizer, 200)
    masker = DynamicMasker.from_tokenizer(tokenizer, max_predictions_per_seq=20, max_ngram=3)
    special = np.isin(rows, [tokenizer.cls_token_id, tokenizer.sep_token_id])
    eligible = (mask > 0) & ~special
    previous_eligible = np.pad(eligible[:, :-1], [(0, 0), (1, 0)])
    # A word starts at a piece that is no "##" continuation, or follows [CLS] / [SEP].
    word_start = eligible & (tokenizer.word_start_flags()[rows] | ~previous_eligible)
    starts = masker._ngram_starts(tf.constant(word_start), tf.constant(eligible),
                                  tf.constant(mask), tf.constant([5, 6], tf.int64)).numpy()
    lengths = []
    for row in range(len(rows)):
        words = np.flatnonzero(word_start[row])
        cuts = [w for w in words if starts[row, w]]
        for begin, end in zip(cuts, cuts[1:]):
            lengths.append(int(word_start[row, begin:end].sum()))
        assert set(np.flatnonzero(starts[row])) <= set(words)  # n-grams start at a word
    counts = np.bincount(lengths, minlength=4)[1:4]
    assert counts.sum() == len(lengths) > 1000  # never longer than 3 words
    expected = np.array([6, 3, 2]) / 11
    assert np.allclose(counts / counts.sum(), expected, atol=0.04), counts / counts.sum()

    x, y = masker({"token_ids": rows, "segment_ids": np.zeros_like(rows), "padding_mask": mask},
                  tf.constant([1, 2], tf.int64))
    predictions = y["mlm_weights"].numpy().sum(axis=1)
    assert (predictions <= np.minimum(20, np.round(mask.sum(1) * 0.15))).all()
    for row, positions in enumerate(x["mask_positions"].numpy()):
        chosen = set(positions[:int(predictions[row])])
        for p in chosen:  # a masked piece's whole word is masked
            begin = p
            while not word_start[row, begin]:
                begin -= 1
            end = begin + 1
            while end < rows.shape[1] and eligible[row, end] and not word_start[row, end]:
                end += 1
            assert set(range(begin, end)) <= chosen


def test_static_ngram_masking_masks_whole_word_ngrams_with_albert_lengths(documents, tokenizer):
    """The Beam pipeline's (static) masking with max_ngram=3: n-grams of whole words, never
    across [CLS] / [SEP], n with p(n) ~ 1/n; max_ngram=1 draws what it drew before."""
    from keras_bert_suite.tasks.pretrainer.data import static_masking

    config = masking_config(tokenizer, max_ngram=3)
    starts = tokenizer.word_start_flags()
    specials = (tokenizer.cls_token_id, tokenizer.sep_token_id)
    rows = [[t for sentence in d for t in sentence] for d in documents]
    rows = [[specials[0], *row[i:i + 126], specials[1]] for row in rows
            for i in range(0, len(row) - 126, 126)]
    words = [[i for i in range(1, len(row) - 1) if starts[row[i]]] for row in rows]
    lengths, rng = [], random.Random(1)
    for row in rows:
        for group in static_masking._ngrams(_whole_words(row, starts), 3, rng):
            assert specials[0] not in [row[i] for i in group]
            # (position 1 may hold a word's tail: the row was cut there)
            assert starts[row[group[0]]] or group[0] == 1
            assert group == list(range(group[0], group[-1] + 1))
            end = group[-1] + 1  # the n-gram ends where a word ends
            assert end == len(row) - 1 or starts[row[end]]
            lengths.append(int(sum(starts[row[i]] or i == 1 for i in group)))
    counts = np.bincount(lengths, minlength=4)[1:4]
    assert counts.sum() == len(lengths) > 1000
    assert np.allclose(counts / counts.sum(), np.array([6, 3, 2]) / 11, atol=0.04), counts

    rng = random.Random(3)
    for row, row_words in zip(rows[:50], words):
        masked, positions, labels = static_masking.mask_instance(row, config, rng)
        assert len(positions) <= min(20, round(len(row) * 0.15))
        chosen = set(positions)
        for p in chosen:  # a masked piece's whole word is masked
            begin = max(w for w in row_words + [1] if w <= p)
            end = min([w for w in row_words if w > p] + [len(row) - 1])
            assert set(range(begin, end)) <= chosen
        assert labels == [row[p] for p in positions]
    plain, one = masking_config(tokenizer), masking_config(tokenizer, max_ngram=1)
    assert (static_masking.mask_instance(rows[0], plain, random.Random(5))
            == static_masking.mask_instance(rows[0], one, random.Random(5)))
    with pytest.raises(ValueError, match="max_ngram must be a positive int"):
        masking_config(tokenizer, max_ngram=0)


def _whole_words(row, starts):
    """Position groups of whole words of a [CLS] ... [SEP] row."""
    words = []
    for i in range(1, len(row) - 1):
        if words and not starts[row[i]]:
            words[-1].append(i)
        else:
            words.append([i])
    return words


def test_max_ngram_1_is_the_masker_as_before(documents, tokenizer):
    rows, mask = _rows(documents, tokenizer, 16)
    features = {"token_ids": rows, "segment_ids": np.zeros_like(rows), "padding_mask": mask}
    seed = tf.constant([4, 2], tf.int64)
    before = DynamicMasker.from_tokenizer(tokenizer)(features, seed)
    after = DynamicMasker.from_tokenizer(tokenizer, max_ngram=1)(features, seed)
    for a, b in zip(tf.nest.flatten(before), tf.nest.flatten(after)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_next_token_targets_are_the_next_tokens_of_each_instance():
    features = {"token_ids": tf.constant([[2, 11, 12, 3, 2, 21, 3, 0, 0],
                                          [2, 5, 6, 7, 3, 0, 0, 0, 0]]),
                "segment_ids": tf.zeros([2, 9], tf.int32),
                "padding_mask": tf.constant([[1, 1, 1, 1, 2, 2, 2, 0, 0],
                                             [1, 1, 1, 1, 1, 0, 0, 0, 0]])}
    x, y = NextTokenTargets(8)(features, tf.constant([1, 2], tf.int64))
    np.testing.assert_array_equal(x["token_ids"], features["token_ids"])  # nothing masked
    np.testing.assert_array_equal(x["mask_positions"], [[0, 1, 2, 4, 5, 0, 0, 0],
                                                        [0, 1, 2, 3, 0, 0, 0, 0]])
    np.testing.assert_array_equal(y["mlm_labels"], [[11, 12, 3, 21, 3, 0, 0, 0],
                                                    [5, 6, 7, 3, 0, 0, 0, 0]])
    np.testing.assert_array_equal(y["mlm_weights"], [[1, 1, 1, 1, 1, 0, 0, 0],
                                                     [1, 1, 1, 1, 0, 0, 0, 0]])
    x, y = NextTokenTargets(3)(features, tf.constant([1, 2], tf.int64))  # a random 3
    for row in range(2):
        ids, mask = features["token_ids"].numpy()[row], features["padding_mask"].numpy()[row]
        for p, label in zip(x["mask_positions"].numpy()[row], y["mlm_labels"].numpy()[row]):
            assert mask[p] == mask[p + 1] > 0 and label == ids[p + 1]
