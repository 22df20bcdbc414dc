"""SQuAD windows (SpanLabelerPreprocessor): parity with Model Garden's squad_lib on real
Quoref questions, labels, byte offsets, the training dataset, and errors on bad files."""

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.tasks.span_labeler import quoref
from keras_bert_suite.tasks.span_labeler import squad
from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor
from keras_bert_suite.tasks.span_labeler.quoref import write_squad_json
from tests.tasks.span_labeler import squad_fixtures as fx


def _np(windows):
    """The windows' arrays as numpy: inputs, labels, example, window index in its example."""
    example = np.asarray(windows.example)
    return {**{k: np.asarray(v) for k, v in windows.inputs.items()},
            **{k: np.asarray(v) for k, v in (windows.labels or {}).items()},
            "example": example,
            "window_index": np.arange(len(example)) - np.asarray(windows.row_splits)[example],
            "is_max_context": np.asarray(windows.is_max_context)}


def _assert_same_windows(windows, reference, max_seq_length):
    ours = _np(windows)
    assert len(ours["token_ids"]) == len(reference)
    np.testing.assert_array_equal(ours["token_ids"], [f.input_ids for f in reference])
    np.testing.assert_array_equal(ours["segment_ids"], [f.segment_ids for f in reference])
    np.testing.assert_array_equal(ours["padding_mask"], [f.input_mask for f in reference])
    np.testing.assert_array_equal(ours["example"], [f.example_index for f in reference])
    np.testing.assert_array_equal(ours["window_index"], [f.doc_span_index for f in reference])
    np.testing.assert_array_equal(
        ours["is_max_context"], fx.model_garden_max_context(reference, max_seq_length))
    np.testing.assert_array_equal(ours["start_positions"], [f.start_position for f in reference])
    np.testing.assert_array_equal(ours["end_positions"], [f.end_position for f in reference])
    return ours


@pytest.mark.needs_tf_graph
def test_windows_match_model_garden():
    (examples, windows), (_, reference) = fx.features_pair(False, 384, 128)
    assert len(examples) == 77  # 80 questions, 3 multi-span ones skipped
    ours = _assert_same_windows(windows, reference, 384)
    assert len(ours["token_ids"]) == 170  # long passages take several windows
    assert (ours["start_positions"] > 0).sum() == 99  # every answer is in at least one window
    assert np.asarray(windows.answer_found).all()


@pytest.mark.needs_tf_graph
def test_unanswerable_and_short_windows_match_model_garden():
    (examples, windows), (_, reference) = fx.features_pair(True, 128, 32)
    ours = _assert_same_windows(windows, reference, 128)
    impossible = [i for i, e in enumerate(examples) if e.is_impossible]
    assert (len(examples), len(impossible), len(ours["token_ids"])) == (97, 20, 1152)
    rows = np.isin(ours["example"], impossible)
    assert not ours["start_positions"][rows].any() and not ours["end_positions"][rows].any()
    answered = {int(i) for i in ours["example"][ours["start_positions"] > 0]}
    assert answered == set(range(len(examples))) - set(impossible)
    # Windows of one example are consecutive, row_splits says where each example's begin.
    np.testing.assert_array_equal(np.diff(np.asarray(windows.row_splits)),
                                  np.bincount(ours["example"], minlength=len(examples)))


@pytest.mark.needs_tf_graph
def test_answer_ending_inside_a_word_keeps_exact_pieces(minilm_dir, tmp_path):
    uncased_tokenizer = fx.tokenizer()
    # The one intended difference: Quoref's answer "Pomp and Circumstance March" ends inside
    # "Marches,". Model Garden falls back to the whole whitespace word (comma included).
    full, _ = quoref.quoref_to_squad(fx.quoref_task_path())
    article = next(a for a in full["data"]
                   if any(qa["id"] == "quoref-4750" for qa in a["paragraphs"][0]["qas"]))
    one = {"data": [{"paragraphs": [{"context": article["paragraphs"][0]["context"], "qas": [
        qa for qa in article["paragraphs"][0]["qas"] if qa["id"] == "quoref-4750"]}]}]}
    _, windows = fx.featurize(uncased_tokenizer, one)
    _, reference = fx.model_garden_features(write_squad_json(one, tmp_path / "one.json"),
                                            fx.vocab_path(minilm_dir), 384, 128)
    ours = _np(windows)
    (start, end), ref = (ours["start_positions"][0], ours["end_positions"][0]), reference[0]
    assert uncased_tokenizer.detokenize(ours["token_ids"][0, start:end + 1]).numpy() == \
        b"pomp and circumstance marches"
    assert ref.tokens[ref.start_position:ref.end_position + 1][-2:] == ["marches", ","]
    assert (ref.start_position, ref.end_position) == (start, end + 1)


def _piece_offsets(windows, row, position):
    """Byte offsets [begin, end) in the example's context of the piece at `position`."""
    example = int(windows.example[row])
    piece = (int(windows.piece_start[row]) + position - int(windows.context_begin[row]))
    return (int(windows.piece_byte_start[example][piece]),
            int(windows.piece_byte_end[example][piece]))


@pytest.mark.needs_tf_graph
def test_offsets_cut_the_answer_from_the_original_context():
    uncased_tokenizer = fx.tokenizer()
    (examples, windows), _ = fx.features_pair(True, 128, 32)
    ours = _np(windows)
    contexts = [c.decode("utf-8") for c in np.asarray(windows.context)]
    assert contexts == [e.context for e in examples]  # valid UTF-8 stays as it is
    rows = np.flatnonzero(ours["start_positions"] > 0)
    for row in rows:
        example = examples[ours["example"][row]]
        data = example.context.encode("utf-8")
        begin, _ = _piece_offsets(windows, row, ours["start_positions"][row])
        _, end = _piece_offsets(windows, row, ours["end_positions"][row])
        assert data[begin:end].decode("utf-8") == example.answer_text, example.qas_id
    # The context part: context_length pieces after [CLS] question [SEP], then one [SEP].
    context_begin = np.asarray(windows.context_begin)
    context_end = context_begin + np.asarray(windows.context_length)
    positions = np.arange(128)
    context_part = (positions >= context_begin[:, None]) & (positions < context_end[:, None])
    np.testing.assert_array_equal(context_part,
                                  ours["segment_ids"].astype(bool)
                                  & (ours["token_ids"] != uncased_tokenizer.sep_token_id))
    assert not ours["is_max_context"][~context_part].any()
    # Every context piece spells its characters: "##" pieces start where the previous ends.
    row = rows[0]
    data = examples[ours["example"][row]].context.encode("utf-8")
    for position in np.flatnonzero(context_part[row]):
        begin, end = _piece_offsets(windows, row, position)
        piece = uncased_tokenizer.id_to_token(int(ours["token_ids"][row, position]))
        assert data[begin:end].decode("utf-8").lower() == piece.removeprefix("##")


@pytest.mark.needs_tf_graph
def test_training_dataset_and_the_preprocessor_in_tf_data():
    (examples, windows), _ = fx.features_pair(True, 128, 32)
    ours = _np(windows)
    preprocessor = SpanLabelerPreprocessor(fx.tokenizer(), 128, 32,
                                           max_question_length=fx.MAX_QUERY_LENGTH)
    dataset, count = squad.training_dataset(preprocessor, examples, batch_size=8, shuffle=False)
    assert count == 1152
    x, y = next(iter(dataset))
    assert set(x) == {"token_ids", "segment_ids", "padding_mask"}
    assert set(y) == {"start_positions", "end_positions"}
    assert x["token_ids"].shape == (8, 128) and x["token_ids"].dtype.name == "int32"
    np.testing.assert_array_equal(x["token_ids"].numpy(), ours["token_ids"][:8])
    np.testing.assert_array_equal(y["end_positions"].numpy(), ours["end_positions"][:8])
    assert sum(1 for _ in dataset) == 144
    shuffled, _ = squad.training_dataset(preprocessor, examples, batch_size=count, seed=3)
    _, all_labels = next(iter(shuffled))
    assert sorted(all_labels["start_positions"].numpy()) == sorted(ours["start_positions"])
    # The same preprocessor mapped over example batches in tf.data (graph mode) and called
    # eagerly gives the same windows.
    some = examples[:12]
    text = ([e.question for e in some], [e.context for e in some])
    answers = {"answer_start": [-1 if e.is_impossible else e.answer_start for e in some],
               "answer_text": ["" if e.is_impossible else e.answer_text for e in some]}
    mapped = tf.data.Dataset.from_tensor_slices((text, answers)).batch(5).map(preprocessor)
    batches = list(mapped.as_numpy_iterator())
    rows = np.isin(ours["example"], np.arange(12))
    np.testing.assert_array_equal(np.concatenate([b[0]["token_ids"] for b in batches]),
                                  ours["token_ids"][rows])
    np.testing.assert_array_equal(np.concatenate([b[1]["start_positions"] for b in batches]),
                                  ours["start_positions"][rows])
    eager_x, eager_y = preprocessor(text, answers)
    np.testing.assert_array_equal(eager_x["segment_ids"], ours["segment_ids"][rows])
    np.testing.assert_array_equal(eager_y["end_positions"], ours["end_positions"][rows])
    np.testing.assert_array_equal(preprocessor(text)["padding_mask"],
                                  ours["padding_mask"][rows])


def _write(tmp_path, data, name="bad.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _one_question(context, answers, **extra):
    qa = {"id": "q1", "question": "Who?", "answers": answers, **extra}
    return {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}


def test_answer_not_at_answer_start_names_file_and_question(tmp_path):
    path = _write(tmp_path, _one_question("Ann met Bob.", [{"text": "Bob", "answer_start": 3}]))
    with pytest.raises(ValueError, match=r"bad\.json: question 'q1'.*'Bob'.*answer_start=3"):
        squad.read_squad_examples(path)


@pytest.mark.parametrize("data, message", [
    ("{\"data\": [", r"not valid JSON \(line 1"),
    ({"articles": []}, "'data' list"),
    ({"data": [{"paragraphs": [{"qas": []}]}]}, r"data\[0\]\.paragraphs\[0\] has no 'context'"),
    ({"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "a", "answers": []}]}]}]},
     r"qas\[0\] has no 'question'"),
    (_one_question("Ann", [], is_impossible="yes"), "is_impossible must be true or false"),
    (_one_question("Ann", [{"text": "Ann", "answer_start": 0}], is_impossible=True),
     "plausible_answers"),
    ({"data": [{"paragraphs": [{"context": "x", "qas": []}]}]}, "no questions found"),
])
def test_malformed_files_say_what_is_wrong(tmp_path, data, message):
    with pytest.raises(ValueError, match=message):
        squad.read_squad_examples(_write(tmp_path, data))


def test_duplicate_ids_and_missing_file(tmp_path):
    data = _one_question("Ann", [{"text": "Ann", "answer_start": 0}])
    data["data"][0]["paragraphs"].append(data["data"][0]["paragraphs"][0])
    with pytest.raises(ValueError, match="'q1' appears twice"):
        squad.read_squad_examples(_write(tmp_path, data))
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        squad.read_squad_examples(str(tmp_path / "nowhere.json"))


@pytest.mark.needs_tf_graph
def test_preprocessor_arguments_and_unlabelled_training():
    uncased_tokenizer = fx.tokenizer()
    with pytest.raises(ValueError, match=r"max_question_length \(64\) \+ 3 special tokens"):
        SpanLabelerPreprocessor(uncased_tokenizer, sequence_length=64, max_question_length=64)
    with pytest.raises(ValueError, match="doc_stride must be a positive int"):
        SpanLabelerPreprocessor(uncased_tokenizer, doc_stride=0)
    with pytest.raises(ValueError, match="tokenizer must be a BertTokenizer"):
        SpanLabelerPreprocessor("vocab.txt")
    assert SpanLabelerPreprocessor(uncased_tokenizer).max_question_length == 64
    assert SpanLabelerPreprocessor(uncased_tokenizer, 64).max_question_length == 20  # (64-3)//3
    preprocessor = SpanLabelerPreprocessor(uncased_tokenizer, sequence_length=32, doc_stride=8,
                                           max_question_length=16)
    with pytest.raises(ValueError, match="pair \\(questions, contexts\\)"):
        preprocessor(["Who?"])
    with pytest.raises(ValueError, match="'answer_start'"):
        preprocessor((["Who?"], ["Ann met Bob."]), {"start": [8]})
    with pytest.raises(ValueError, match="sample_weight is not supported"):
        preprocessor((["Who?"], ["Ann met Bob."]), None, [1.0])
    examples = squad.examples_from_squad_json(_one_question("Ann met Bob.", []))
    with pytest.raises(ValueError, match="'q1' has no answer; training needs one"):
        squad.training_windows(preprocessor, examples)
    windows = preprocessor.windows(["Who?"], ["Ann met Bob."])
    assert windows.labels is None and windows.inputs["token_ids"].shape == (1, 32)
    # An answer made only of characters the tokenizer drops (U+200B) has no pieces.
    dropped = squad.examples_from_squad_json(
        _one_question("Ann met \u200b Bob.", [{"text": "\u200b", "answer_start": 8}]))
    with pytest.raises(ValueError, match=r"'q1': the answer '.u200b' has no tokens \(only"):
        squad.training_windows(preprocessor, dropped)
