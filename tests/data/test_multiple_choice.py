"""SWAG reader and (context, choice) packing, with token ids checked against transformers'
BertTokenizer pair encoding on the real MiniLM vocabulary."""

import csv

import numpy as np
import pytest

from keras_bert_suite.tasks.multiple_choice.swag import make_multiple_choice_dataset
from keras_bert_suite.tasks.multiple_choice.swag import pack_multiple_choice
from keras_bert_suite.tasks.multiple_choice.swag import read_swag

pytestmark = pytest.mark.backend_independent

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
    import transformers

    return transformers.BertTokenizer.from_pretrained(minilm_dir)


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


@pytest.mark.parametrize("sequence_length", [64, 24])  # 24 truncates the longer segment
def test_packing_matches_transformers(swag_file, uncased_tokenizer, hf_tokenizer,
                                      sequence_length):
    swag = read_swag(swag_file)
    packed = pack_multiple_choice(swag.contexts, swag.choices, uncased_tokenizer,
                                  sequence_length=sequence_length)
    assert {k: v.shape for k, v in packed.items()} == {
        name: (3, 4, sequence_length) for name in ("token_ids", "segment_ids", "padding_mask")}
    for row in (0, 2):
        expected = hf_tokenizer([swag.contexts[row]] * 4, swag.choices[row],
                                truncation="longest_first", padding="max_length",
                                max_length=sequence_length)
        np.testing.assert_array_equal(packed["token_ids"][row], expected["input_ids"])
        np.testing.assert_array_equal(packed["segment_ids"][row], expected["token_type_ids"])
        np.testing.assert_array_equal(packed["padding_mask"][row], expected["attention_mask"])
    if sequence_length == 24:
        assert packed["padding_mask"][2].all()  # every pair of row 2 was truncated
    else:
        assert packed["token_ids"][0, 0, :3].tolist() == [101, 2372, 1997]  # [CLS] members of


def test_multiple_choice_dataset(swag_file, uncased_tokenizer):
    swag = read_swag(swag_file)
    batches = list(make_multiple_choice_dataset(swag, uncased_tokenizer, sequence_length=32,
                                                batch_size=2).as_numpy_iterator())
    (x, y), (x2, y2) = batches
    assert x["token_ids"].shape == (2, 4, 32) and y.tolist() == [0, 2] and y2.tolist() == [2]
    expected = pack_multiple_choice(swag.contexts, swag.choices, uncased_tokenizer, 32)
    np.testing.assert_array_equal(np.concatenate([x["token_ids"], x2["token_ids"]]),
                                  expected["token_ids"])
