"""Classification/regression files: CSV, TSV, JSON Lines on real review sentences, and errors
that name the file and line."""

import bz2
import csv
import json
import sys

import numpy as np
import pytest

from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.classifier.data import learn_label_names
from keras_bert_suite.tasks.classifier.data import make_classification_dataset
from keras_bert_suite.tasks.classifier.data import read_classification_file
from keras_bert_suite.tasks.classifier.tfds import load_tfds


@pytest.fixture(scope="module")
def reviews():
    """52 real Rotten Tomatoes review rows (category, text), read with the csv module."""
    with bz2.open(corpora.fetch_rotten_tomatoes(), "rt", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["category"] in ("fresh", "rotten")]
    picked = rows[::250]
    assert any("," in r["text"] for r in picked)  # commas make the CSV quoting matter
    return [(r["category"], r["text"]) for r in picked]


def _write_csv(path, header, rows, delimiter=",", quoting=csv.QUOTE_MINIMAL):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter=delimiter, quoting=quoting, escapechar="\\"
                            if quoting == csv.QUOTE_NONE else None)
        if header:
            writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def _write_text(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_csv_round_trip_with_learned_labels(tmp_path, reviews):
    path = _write_csv(tmp_path / "reviews.csv", ["label", "review"],
                      [(c, t) for c, t in reviews])
    examples = read_classification_file(path, text_column="review")
    assert examples.texts == [t for _, t in reviews]
    assert examples.label_names == ["fresh", "rotten"]
    np.testing.assert_array_equal(examples.labels, [int(c == "rotten") for c, _ in reviews])
    assert examples.labels.dtype == np.int32 and examples.text_pairs is None
    # A record starts after the header and the lines of the records before it (one review
    # holds a line break inside its quoted text).
    breaks = np.cumsum([0] + [t.count("\n") for _, t in reviews[:-1]])
    assert breaks[-1] > 0
    np.testing.assert_array_equal(examples.line_numbers, 2 + np.arange(len(reviews)) + breaks)


def test_tsv_without_quoting_keeps_stray_quotes(tmp_path):
    # GLUE-style: a lone `"` is text. The csv module's default quoting would swallow the tab.
    rows = ['the " witness " , he said\t1', '"quoted start\t0']
    path = _write_text(tmp_path / "train.tsv", "sentence\tlabel\n" + "\n".join(rows) + "\n")
    examples = read_classification_file(path, text_column="sentence", label_names=["0", "1"],
                                        quoting=csv.QUOTE_NONE)
    assert examples.texts == ['the " witness " , he said', '"quoted start']
    np.testing.assert_array_equal(examples.labels, [1, 0])
    with pytest.raises(ValueError, match=r"train\.tsv, line 3: malformed .*QUOTE_NONE"):
        read_classification_file(path, text_column="sentence")  # an unclosed quoted field


def test_jsonl_pairs_with_given_label_names(tmp_path, reviews):
    records = [{"a": t, "b": reviews[-1 - i][1], "label": int(c == "fresh"), "id": i}
               for i, (c, t) in enumerate(reviews[:5])]
    path = _write_text(tmp_path / "pairs.jsonl",
                       "\n".join(json.dumps(r) for r in records) + "\n\n")  # blank line skipped
    examples = read_classification_file(path, text_column="a", text_pair_column="b",
                                        label_names=["0", "1"])
    assert examples.text_pairs == [r["b"] for r in records]
    np.testing.assert_array_equal(examples.labels, [r["label"] for r in records])
    np.testing.assert_array_equal(examples.line_numbers, [1, 2, 3, 4, 5])


def test_regression_labels_and_headerless_columns(tmp_path):
    path = _write_csv(tmp_path / "sts.tsv", None, [
        ("0", "A plane is taking off.", "An air plane is taking off.", "5.000"),
        ("1", "A man is playing a flute.", "A man is playing a flute.", "3.800"),
        ("2", "A man is slicing a tomato.", "A man is playing a guitar.", "0.25")],
        delimiter="\t")
    examples = read_classification_file(path, text_column=1, text_pair_column=2,
                                        label_column=3, header=False, regression=True)
    np.testing.assert_allclose(examples.labels, [5.0, 3.8, 0.25])
    assert examples.labels.dtype == np.float32 and examples.label_names is None
    assert examples.text_pairs[2] == "A man is playing a guitar."
    with pytest.raises(ValueError, match="0-based indices"):
        read_classification_file(path, text_column="text", header=False)


def test_unlabelled_split(tmp_path, reviews):
    path = _write_csv(tmp_path / "test.csv", ["index", "sentence"],
                      [(i, t) for i, (_, t) in enumerate(reviews[:3])])
    examples = read_classification_file(path, text_column="sentence", label_column=None)
    assert examples.labels is None and examples.label_names is None and len(examples) == 3


def test_learned_label_order_is_stable():
    assert learn_label_names(["neg", "pos", "neg"]) == ["neg", "pos"]
    assert learn_label_names(["10", "2", "1", "2"]) == ["1", "2", "10"]  # numeric, not "10" < "2"
    assert learn_label_names([2, 0, 1.0, True]) == ["0", "1", "2", "true"]


def test_compressed_real_corpus():
    examples = read_classification_file(corpora.fetch_rotten_tomatoes(), label_column="category",
                                        allow_empty_text=True)
    assert examples.label_names == ["fresh", "plot", "rotten"]
    np.testing.assert_array_equal(np.bincount(examples.labels), [7403, 1097, 5405])


def test_multiline_field_keeps_line_numbers(tmp_path):
    path = _write_text(tmp_path / "multi.csv",
                       'text,label\n"first line\nsecond line",pos\nplain,neg\n,pos\n')
    with pytest.raises(ValueError, match=r"multi\.csv, line 5: the text is empty"):
        read_classification_file(path)
    examples = read_classification_file(path, allow_empty_text=True)
    assert examples.texts == ["first line\nsecond line", "plain", ""]
    np.testing.assert_array_equal(examples.line_numbers, [2, 4, 5])


@pytest.mark.parametrize("name, content, kwargs, message", [
    ("a.csv", "text,label\ngood film,pos\nbad film,meh\n", {"label_names": ["neg", "pos"]},
     r"a\.csv, line 3: unknown label 'meh'; known labels are \['neg', 'pos'\]"),
    ("a.csv", "text,label\ngood film,pos\n   ,neg\n", {}, r"a\.csv, line 3: the text is empty"),
    ("a.csv", "text,label\ngood film,pos\nbad, film,neg\n", {},
     r"a\.csv, line 3: 3 fields, but the header has 2"),
    ("a.csv", "sentence,label\ngood film,pos\n", {},
     r"a\.csv, line 2: no column 'text'; the available columns are \['sentence', 'label'\]"),
    ("a.csv", "text,score\nfine,4.5\nok,n/a\n", {"label_column": "score", "regression": True},
     r"a\.csv, line 3: regression label 'n/a' is not a finite number"),
    ("a.csv", "text,label\ngood film,pos\nbad film,\n", {}, r"a\.csv, line 3: the label is empty"),
    ("a.csv", "text,label\n", {}, r"a\.csv: the file is empty \(no data rows after the header\)"),
    ("a.csv", "", {}, r"a\.csv: the file is empty"),
    ("a.csv", 'text,label\n"unclosed,pos\n', {}, r"a\.csv, line 2: malformed"),
    ("a.csv", "text,text,label\na,b,pos\n", {}, r"line 1: the header repeats column name"),
    ("a.jsonl", '{"text": "fine", "label": 1}\n{"text": "fine", "label": 1\n', {},
     r"a\.jsonl, line 2: not valid JSON"),
    ("a.jsonl", '["fine", 1]\n', {}, r"a\.jsonl, line 1: expected a JSON object, got list"),
    ("a.jsonl", '{"text": "fine", "label": 1}\n{"text": 3, "label": 1}\n', {},
     r"a\.jsonl, line 2: the text must be a string"),
    ("a.txt", "fine\t1\n", {}, r"Cannot tell the format of .*a\.txt.*Pass format="),
])
def test_errors_name_file_and_line(tmp_path, name, content, kwargs, message):
    path = _write_text(tmp_path / name, content)
    with pytest.raises(ValueError, match=message):
        read_classification_file(path, **kwargs)


def test_missing_file_and_bad_encoding(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such data file"):
        read_classification_file(str(tmp_path / "missing.csv"))
    path = tmp_path / "latin1.csv"
    path.write_bytes("text,label\ngood,pos\ncaf\xe9 cr\xe8me,neg\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.csv, line 3: not valid utf-8-sig text"):
        read_classification_file(str(path))


@pytest.mark.needs_tf_graph
def test_dataset_batches_feed_the_preprocessor(tmp_path, reviews, uncased_tokenizer):
    from keras_bert_suite.text import BertPreprocessor

    path = _write_csv(tmp_path / "pairs.csv", ["a", "b", "label"],
                      [(t, reviews[i + 1][1], c) for i, (c, t) in enumerate(reviews[:10])])
    examples = read_classification_file(path, text_column="a", text_pair_column="b")
    preprocessor = BertPreprocessor(uncased_tokenizer, sequence_length=48)

    raw = list(make_classification_dataset(examples, batch_size=4).as_numpy_iterator())
    assert [len(y) for _, y in raw] == [4, 4, 2]
    (a, b), y = raw[0]
    assert [t.decode() for t in a] == examples.texts[:4] and list(y) == list(examples.labels[:4])

    packed = list(make_classification_dataset(examples, batch_size=4,
                                              preprocessor=preprocessor).as_numpy_iterator())
    x, y = packed[0]
    expected = preprocessor((examples.texts[:4], examples.text_pairs[:4]))
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(x[name], expected[name])

    shuffled = [list(y) for _, y in make_classification_dataset(
        examples, batch_size=10, shuffle=True, seed=3).as_numpy_iterator()]
    again = [list(y) for _, y in make_classification_dataset(
        examples, batch_size=10, shuffle=True, seed=3).as_numpy_iterator()]
    assert shuffled == again and sorted(shuffled[0]) == sorted(examples.labels.tolist())


@pytest.mark.needs_tf_graph
def test_unlabelled_pair_dataset(tmp_path, reviews):
    path = _write_csv(tmp_path / "test.csv", ["a", "b"], [(t, t[::-1]) for _, t in reviews[:3]])
    examples = read_classification_file(path, text_column="a", text_pair_column="b",
                                        label_column=None)
    (a, b), = list(make_classification_dataset(examples, batch_size=3).as_numpy_iterator())
    assert [t.decode() for t in b] == examples.text_pairs


def test_load_tfds_without_tensorflow_datasets(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # import fails as if absent
    with pytest.raises(ImportError, match="pip install tensorflow-datasets"):
        load_tfds("glue/sst2", "train", text_column="sentence")
