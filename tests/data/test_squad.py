"""SQuAD features: parity with Model Garden's squad_lib on real Quoref questions, labels,
character offsets, tf.data, and errors on bad files."""

import json

import numpy as np
import pytest

from keras_bert_suite.tasks.span_labeler import quoref
from keras_bert_suite.tasks.span_labeler import squad
from keras_bert_suite.tasks.span_labeler.quoref import write_squad_json
from tests.data import squad_fixtures as fx

pytestmark = pytest.mark.backend_independent


def _assert_same_features(ours, reference, max_seq_length):
    assert len(ours) == len(reference)
    np.testing.assert_array_equal(ours.token_ids, [f.input_ids for f in reference])
    np.testing.assert_array_equal(ours.segment_ids, [f.segment_ids for f in reference])
    np.testing.assert_array_equal(ours.padding_mask, [f.input_mask for f in reference])
    np.testing.assert_array_equal(ours.example_index, [f.example_index for f in reference])
    np.testing.assert_array_equal(ours.window_index, [f.doc_span_index for f in reference])
    np.testing.assert_array_equal(
        ours.token_is_max_context, fx.model_garden_max_context(reference, max_seq_length))
    np.testing.assert_array_equal(ours.start_positions, [f.start_position for f in reference])
    np.testing.assert_array_equal(ours.end_positions, [f.end_position for f in reference])


def test_features_match_model_garden():
    (examples, ours), (_, reference) = fx.features_pair(False, 384, 128)
    assert len(examples) == 77  # 80 questions, 3 multi-span ones skipped
    _assert_same_features(ours, reference, 384)
    assert len(ours) == 170  # long passages take several windows
    assert (ours.start_positions > 0).sum() == 99  # every answer is in at least one window


def test_unanswerable_and_short_windows_match_model_garden():
    (examples, ours), (_, reference) = fx.features_pair(True, 128, 32)
    _assert_same_features(ours, reference, 128)
    impossible = [i for i, e in enumerate(examples) if e.is_impossible]
    assert (len(examples), len(impossible), len(ours)) == (97, 20, 1152)
    rows = np.isin(ours.example_index, impossible)
    assert not ours.start_positions[rows].any() and not ours.end_positions[rows].any()
    answered = {int(i) for i in ours.example_index[ours.start_positions > 0]}
    assert answered == set(range(len(examples))) - set(impossible)


def test_answer_ending_inside_a_word_keeps_exact_pieces(minilm_dir, tmp_path):
    uncased_tokenizer = fx.tokenizer()
    # The one intended difference: Quoref's answer "Pomp and Circumstance March" ends inside
    # "Marches,". Model Garden falls back to the whole whitespace word (comma included).
    full, _ = quoref.quoref_to_squad(fx.quoref_task_path())
    article = next(a for a in full["data"]
                   if any(qa["id"] == "quoref-4750" for qa in a["paragraphs"][0]["qas"]))
    one = {"data": [{"paragraphs": [{"context": article["paragraphs"][0]["context"], "qas": [
        qa for qa in article["paragraphs"][0]["qas"] if qa["id"] == "quoref-4750"]}]}]}
    _, ours = fx.featurize(uncased_tokenizer, one)
    _, reference = fx.model_garden_features(write_squad_json(one, tmp_path / "one.json"),
                                            fx.vocab_path(minilm_dir), 384, 128)
    (start, end), ref = (ours.start_positions[0], ours.end_positions[0]), reference[0]
    assert uncased_tokenizer.detokenize(ours.token_ids[0, start:end + 1]).numpy() == \
        b"pomp and circumstance marches"
    assert ref.tokens[ref.start_position:ref.end_position + 1][-2:] == ["marches", ","]
    assert (ref.start_position, ref.end_position) == (start, end + 1)


def test_offsets_cut_the_answer_from_the_original_context():
    uncased_tokenizer = fx.tokenizer()
    (examples, features), _ = fx.features_pair(True, 128, 32)
    rows = np.flatnonzero(features.start_positions > 0)
    for row in rows:
        example = examples[features.example_index[row]]
        begin = features.token_offsets[row, features.start_positions[row], 0]
        end = features.token_offsets[row, features.end_positions[row], 1]
        assert example.context[begin:end] == example.answer_text, example.qas_id
    context_part = (features.segment_ids.astype(bool)
                    & (features.token_ids != uncased_tokenizer.sep_token_id))
    assert (features.token_offsets[context_part] >= 0).all()
    assert (features.token_offsets[~context_part] == -1).all()
    # Every context piece spells its characters: "##" pieces start where the previous ends.
    row = rows[0]
    example = examples[features.example_index[row]]
    pieces = [uncased_tokenizer.id_to_token(int(i)) for i in features.token_ids[row]]
    for position in np.flatnonzero(context_part[row]):
        begin, end = features.token_offsets[row, position]
        assert example.context[begin:end].lower() == pieces[position].removeprefix("##")


def test_training_and_inference_datasets():
    (_, features), _ = fx.features_pair(True, 128, 32)
    x, y = next(iter(squad.training_dataset(features, batch_size=8, shuffle=False)))
    assert set(x) == {"token_ids", "segment_ids", "padding_mask"}
    assert set(y) == {"start_positions", "end_positions"}
    assert x["token_ids"].shape == (8, 128) and x["token_ids"].dtype.name == "int32"
    np.testing.assert_array_equal(x["token_ids"].numpy(), features.token_ids[:8])
    np.testing.assert_array_equal(y["end_positions"].numpy(), features.end_positions[:8])
    batches = list(squad.inference_dataset(features, batch_size=64))
    np.testing.assert_array_equal(
        np.concatenate([b["segment_ids"].numpy() for b in batches]), features.segment_ids)
    shuffled = next(iter(squad.training_dataset(features, batch_size=len(features), seed=3)))
    assert sorted(shuffled[1]["start_positions"].numpy()) == sorted(features.start_positions)


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


def test_featurizer_arguments_and_unlabelled_training():
    uncased_tokenizer = fx.tokenizer()
    with pytest.raises(ValueError, match="max_query_length .64. \\+ 3 special tokens"):
        squad.SquadFeaturizer(uncased_tokenizer, max_seq_length=64, max_query_length=64)
    with pytest.raises(ValueError, match="doc_stride must be a positive int"):
        squad.SquadFeaturizer(uncased_tokenizer, doc_stride=0)
    examples = squad.examples_from_squad_json(_one_question("Ann met Bob.", []))
    featurizer = squad.SquadFeaturizer(uncased_tokenizer, max_seq_length=32, doc_stride=8,
                                     max_query_length=16)
    with pytest.raises(ValueError, match="'q1' has no answer; training needs one"):
        featurizer.featurize(examples)
    features = featurizer.featurize(examples, is_training=False)
    assert features.token_ids.shape == (1, 32) and not features.start_positions.any()
