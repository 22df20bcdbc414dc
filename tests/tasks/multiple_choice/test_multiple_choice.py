"""SWAG reader and the multiple-choice preprocessor's (context, choice) packing, checked
against an independent Python packing and transformers' pair encoding on the real MiniLM
vocabulary."""

import csv

import numpy as np
import pytest

from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_suite.tasks.multiple_choice.swag import make_multiple_choice_dataset
from keras_bert_suite.tasks.multiple_choice.swag import read_swag


HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]
# Rows in the official files' layout (the leading column is pandas' unnamed index).
ROWS = [
    ["0", "anetv_jkn6uvmqwh4", "3416",
     "Members of the procession walk down the street holding small horn brass instruments. "
     "A drum line",
     "Members of the procession walk down the street holding small horn brass instruments.",
     "A drum line", "gold", "passes by walking down the street playing their instruments.",
     "has heard approaching them.", "arrives and they're outside dancing and asleep.",
     "turns the lead singer watches the performance.", "0"],
    ["1", "lsmdc3016_CHASING_MAVERICKS-6791", "3795",
     "Students lower their eyes nervously. She", "Students lower their eyes nervously.", "She",
     "gold", "pats her shoulder, then saunters toward someone.", "turns with two students.",
     "walks slowly towards someone.", "wheels around as her dog thunders out.", "2"],
    ["2", "anetv_dm5WXFiQZUQ", "18419",
     "He rides the motorcycle down the hall and into the elevator. He",
     "He rides the motorcycle down the hall and into the elevator.", "He", "gen",
     "looks at a mirror in the mirror as he watches someone walk through a door.",
     "stops, listening to a cup of coffee with the seated woman, who's standing.",
     "exits the building and rides the motorcycle into a casino where he performs several "
     "tricks as people watch.", "pulls the bag out of his pocket and hands it to someone's "
     "grandma.", "2"],
]


def _write(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def swag_file(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("swag") / "val.csv", HEADER, ROWS)


@pytest.fixture(scope="module")
def hf_tokenizer(minilm_dir):
    transformers = pytest.importorskip("transformers")

    return transformers.BertTokenizerFast.from_pretrained(minilm_dir)


def test_read_swag(swag_file):
    swag = read_swag(swag_file)
    assert len(swag) == 3
    assert swag.contexts[1] == "Students lower their eyes nervously."
    assert swag.choices[1] == ["She pats her shoulder, then saunters toward someone.",
                               "She turns with two students.", "She walks slowly towards someone.",
                               "She wheels around as her dog thunders out."]
    np.testing.assert_array_equal(swag.labels, [0, 2, 2])
    assert swag.ids[0] == "anetv_jkn6uvmqwh4-3416" and list(swag.line_numbers) == [2, 3, 4]


def test_read_swag_test_split(tmp_path):
    path = _write(tmp_path / "test.csv", HEADER[:-1], [row[:-1] for row in ROWS])
    swag = read_swag(path)
    assert swag.labels is None and len(swag.choices[2]) == 4
    with pytest.raises(ValueError, match=r"missing SWAG column\(s\) \['label'\]"):
        read_swag(path, require_labels=True)


@pytest.mark.parametrize("column, value, message", [
    ("label", "4", r"line 3: label '4' is not a choice index; SWAG labels are 0..3"),
    ("ending2", " ", r"line 3: empty ending\(s\) \['ending2'\]"),
    ("sent1", "", r"line 3: the context \(sent1\) is empty"),
])
def test_swag_errors_name_the_line(tmp_path, column, value, message):
    rows = [list(row) for row in ROWS]
    rows[1][HEADER.index(column)] = value
    with pytest.raises(ValueError, match=message):
        read_swag(_write(tmp_path / "bad.csv", HEADER, rows))


def test_missing_swag_columns(tmp_path):
    path = _write(tmp_path / "bad.csv", ["sent1", "ending0"], [["A man walks.", "He sits."]])
    with pytest.raises(ValueError, match=r"bad\.csv, line 1: missing SWAG column\(s\) \['sent2'"):
        read_swag(path)


def _longest_first(n1, n2, budget):
    """Kept lengths of a pair, Hugging Face `tokenizers`' LongestFirst rule: the shorter
    segment stays whole when the longer can fill the rest; otherwise both get half, the
    second one the odd token."""
    if n1 + n2 <= budget:
        return n1, n2
    short, long_ = sorted((n1, n2))
    if short <= budget // 2:
        kept = (short, budget - short)
    else:
        kept = (budget // 2, budget // 2 + budget % 2)
    return kept if n1 <= n2 else kept[::-1]


def _python_packing(tokenizer, contexts, choices, sequence_length):
    """Independent packing: encode_batch, longest_first, [CLS] a [SEP] b [SEP], padding."""
    num_choices = len(choices[0])
    first = tokenizer.encode_batch([c for c in contexts for _ in range(num_choices)])
    second = tokenizer.encode_batch([choice for row in choices for choice in row])
    token_ids, segment_ids, truncated = [], [], []
    for a, b in zip(first, second):
        n1, n2 = _longest_first(len(a), len(b), sequence_length - 3)
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        ids = [cls] + a[:n1] + [sep] + b[:n2] + [sep]
        segments = [0] * (n1 + 2) + [1] * (n2 + 1)
        pad = sequence_length - len(ids)
        token_ids.append(ids + [0] * pad)
        segment_ids.append(segments + [0] * pad)
        truncated.append(len(a) + len(b) + 3 > sequence_length)
    shape = (len(contexts), num_choices, sequence_length)
    token_ids = np.reshape(token_ids, shape)
    return ({"token_ids": token_ids, "segment_ids": np.reshape(segment_ids, shape),
             "padding_mask": (token_ids != 0).astype(np.int32)},
            np.reshape(truncated, shape[:2]))


@pytest.mark.parametrize("sequence_length", [64, 24, 12])  # 24, 12 truncate
@pytest.mark.needs_tf_graph
def test_packing_matches_an_independent_packing(swag_file, uncased_tokenizer, hf_tokenizer,
                                                sequence_length):
    swag = read_swag(swag_file)
    preprocessor = MultipleChoicePreprocessor(uncased_tokenizer, sequence_length)
    packed, truncated = preprocessor.pack_with_truncation(swag.contexts, swag.choices)
    packed = {k: np.asarray(v) for k, v in packed.items()}
    assert {k: v.shape for k, v in packed.items()} == {
        name: (3, 4, sequence_length) for name in ("token_ids", "segment_ids", "padding_mask")}
    expected, expected_truncated = _python_packing(uncased_tokenizer, swag.contexts,
                                                   swag.choices, sequence_length)
    for name in expected:
        np.testing.assert_array_equal(packed[name], expected[name], err_msg=name)
    np.testing.assert_array_equal(truncated, expected_truncated)
    called = preprocessor((swag.contexts, swag.choices))
    np.testing.assert_array_equal(called["token_ids"], packed["token_ids"])
    for row in range(3):  # Hugging Face's pair encoding
        reference = hf_tokenizer([swag.contexts[row]] * 4, swag.choices[row],
                                 truncation="longest_first", padding="max_length",
                                 max_length=sequence_length)
        np.testing.assert_array_equal(packed["token_ids"][row], reference["input_ids"])
        np.testing.assert_array_equal(packed["segment_ids"][row], reference["token_type_ids"])
        np.testing.assert_array_equal(packed["padding_mask"][row], reference["attention_mask"])
    if sequence_length == 64:
        assert not np.asarray(truncated).any()
        assert packed["token_ids"][0, 0, :3].tolist() == [101, 2372, 1997]  # [CLS] members of
    else:
        assert np.asarray(truncated)[2].all()  # every pair of row 2 was truncated
        assert packed["padding_mask"][2].all()


@pytest.mark.needs_tf_graph
def test_multiple_choice_dataset(swag_file, uncased_tokenizer):
    swag = read_swag(swag_file)
    preprocessor = MultipleChoicePreprocessor(uncased_tokenizer, sequence_length=32)
    batches = list(make_multiple_choice_dataset(swag, preprocessor,
                                                batch_size=2).as_numpy_iterator())
    (x, y), (x2, y2) = batches
    assert x["token_ids"].shape == (2, 4, 32) and y.tolist() == [0, 2] and y2.tolist() == [2]
    expected, _ = _python_packing(uncased_tokenizer, swag.contexts, swag.choices, 32)
    for name in expected:
        np.testing.assert_array_equal(np.concatenate([x[name], x2[name]]), expected[name])
    shuffled = list(make_multiple_choice_dataset(swag, preprocessor, batch_size=3, shuffle=True,
                                                 seed=0).as_numpy_iterator())
    (sx, sy), = shuffled
    order = [int(np.flatnonzero((expected["token_ids"] == row).all(axis=(1, 2)))[0])
             for row in sx["token_ids"]]
    assert sorted(order) == [0, 1, 2] and sy.tolist() == swag.labels[order].tolist()
    unlabelled = read_swag(swag_file, require_labels=False)
    only_x, = make_multiple_choice_dataset(unlabelled, preprocessor,
                                           batch_size=4).as_numpy_iterator()  # inputs only
    np.testing.assert_array_equal(only_x["token_ids"], expected["token_ids"])


@pytest.mark.needs_tf_graph
def test_preprocessor_errors(uncased_tokenizer):
    preprocessor = MultipleChoicePreprocessor(uncased_tokenizer, sequence_length=16)
    with pytest.raises(ValueError, match=r"pair \(contexts \[B\], choices \[B, C\]\)"):
        preprocessor(["A man walks."])
    with pytest.raises(ValueError, match=r"contexts must be \[B\] and choices"):
        preprocessor((["A man walks."], ["He sits.", "He runs."]))
    with pytest.raises(ValueError, match="truncate must be one of"):
        MultipleChoicePreprocessor(uncased_tokenizer, truncate="end")
