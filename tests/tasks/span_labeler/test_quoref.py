"""Quoref (BIG-bench natural-instructions task) -> SQuAD v1.1 JSON, on the real task file."""

import json

import pytest

from keras_bert_suite.tasks.span_labeler import quoref
from keras_bert_suite.tasks.span_labeler import squad
from tests.tasks.span_labeler import squad_fixtures as fx


@pytest.fixture(scope="module")
def task_path():
    return fx.quoref_task_path()


@pytest.fixture(scope="module")
def converted(task_path):
    return quoref.quoref_to_squad(task_path)


def test_every_single_span_answer_is_found_in_its_passage(converted, tmp_path):
    squad_json, report = converted
    assert report == {"questions": 6500, "converted": 5820, "skipped_multi_span": 680,
                      "skipped_not_in_passage": 0}
    contexts = [a["paragraphs"][0]["context"] for a in squad_json["data"]]
    assert len(contexts) == len(set(contexts))  # one paragraph per passage
    assert sum(len(a["paragraphs"][0]["qas"]) for a in squad_json["data"]) == 5820
    # The written file reads back as SQuAD: every answer_start checked against its context.
    examples = squad.read_squad_examples(
        quoref.write_squad_json(squad_json, tmp_path / "quoref.json"))
    assert len(examples) == 5820 and len({e.context for e in examples}) == len(contexts)


def test_first_question(converted):
    qa = converted[0]["data"][0]["paragraphs"][0]["qas"][0]
    context = converted[0]["data"][0]["paragraphs"][0]["context"]
    assert qa["id"] == "quoref-0"
    assert qa["question"].startswith("What is the first name of the person who doubted")
    # The task's target is "Catherine." : the appended period is dropped.
    assert qa["answers"] == [{"text": "Catherine", "answer_start": context.index("Catherine H")}]
    assert context.endswith("released during the event.")  # the task's trailing space is gone


def test_multi_span_questions_as_alternatives(task_path):
    squad_json, report = quoref.quoref_to_squad(task_path, multi_span="alternatives", limit=50)
    assert report == {"questions": 50, "converted": 50, "skipped_multi_span": 0,
                      "skipped_not_in_passage": 0}
    qas = {qa["id"]: qa for a in squad_json["data"] for qa in a["paragraphs"][0]["qas"]}
    assert [a["text"] for a in qas["quoref-45"]["answers"]] == ["Columbus", "Nathaniel"]
    with pytest.raises(ValueError, match="multi_span must be one of"):
        quoref.quoref_to_squad(task_path, multi_span="first")


def test_find_answer_prefers_whole_words():
    assert quoref.find_answer("Annual report by Ann.", "Ann") == 17
    assert quoref.find_answer("The Annual report.", "Ann") == 4  # no whole word: first match
    assert quoref.find_answer("The report.", "Ann") is None


def _task_file(tmp_path, examples):
    path = tmp_path / "task.json"
    path.write_text(json.dumps({"name": "subtask002", "examples": examples}))
    return str(path)


def test_answer_not_in_passage_is_counted_or_an_error_in_strict_mode(task_path, tmp_path):
    with open(task_path, encoding="utf-8") as f:
        real = json.load(f)["examples"][:3]
    real[1] = dict(real[1], target=["Nobody Ever."])
    path = _task_file(tmp_path, real)
    _, report = quoref.quoref_to_squad(path)
    assert report["converted"] == 2 and report["skipped_not_in_passage"] == 1
    with pytest.raises(ValueError, match=r"task\.json: examples\[1\]: the answer 'Nobody Ever'"):
        quoref.quoref_to_squad(path, strict=True)


@pytest.mark.parametrize("examples, message", [
    ([{"input": "Passage: text without a question", "target": ["x."]}], r"examples\[0\]"),
    ([{"input": "Passage: a \nQuestion: b?", "target": []}], r"examples\[0\]"),
    ([{"input": "Question: b?", "target": ["x."]}], r"examples\[0\]"),
])
def test_malformed_task_files(tmp_path, examples, message):
    with pytest.raises(ValueError, match=message):
        quoref.read_quoref_task(_task_file(tmp_path, examples))


def test_missing_or_wrong_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        quoref.read_quoref_task(str(tmp_path / "none.json"))
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ValueError, match="'examples' list"):
        quoref.read_quoref_task(str(tmp_path / "list.json"))


def test_split_by_passage_keeps_passages_on_one_side(task_path):
    squad_json, _ = quoref.quoref_to_squad(task_path, limit=400)
    train, dev = quoref.split_by_passage(squad_json, dev_fraction=0.25, seed=0)
    contexts = lambda d: {a["paragraphs"][0]["context"] for a in d["data"]}  # noqa: E731
    assert not contexts(train) & contexts(dev)
    assert len(train["data"]) + len(dev["data"]) == len(squad_json["data"])
    assert len(dev["data"]) == round(0.25 * len(squad_json["data"]))
    again, _ = quoref.split_by_passage(squad_json, dev_fraction=0.25, seed=0)
    assert again == train
    with pytest.raises(ValueError, match="dev_fraction"):
        quoref.split_by_passage(squad_json, dev_fraction=1.0)
