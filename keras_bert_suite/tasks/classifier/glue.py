"""GLUE task definitions and a reader for the official GLUE TSV files.

The layout is that of the GLUE data download (`download_glue_data.py`): one directory per
task (CoLA/, SST-2/, MRPC/, STS-B/, QQP/, MNLI/, QNLI/, RTE/, WNLI/, diagnostic/) holding
train.tsv, dev.tsv, test.tsv (MNLI: dev_matched.tsv, dev_mismatched.tsv, test_matched.tsv,
test_mismatched.tsv; AX: diagnostic.tsv). The files are not quoted: a `"` is text.

Label ids follow tensorflow-datasets / Hugging Face `datasets` (e.g. MNLI 0 entailment,
1 neutral, 2 contradiction), so models trained here and there agree.

Example (one MRPC line, laid out as in the GLUE download):
>>> import os
>>> os.makedirs("glue/MRPC", exist_ok=True)
>>> with open("glue/MRPC/train.tsv", "w") as f:
...     _ = f.write("Quality\\t#1 ID\\t#2 ID\\t#1 String\\t#2 String\\n"
...                 "1\\t702876\\t702977\\tHe said yes.\\tHe agreed.\\n")
>>> train = read_glue("mrpc", "glue", "train")
>>> train.texts[0], train.text_pairs[0], int(train.labels[0]), train.label_names
('He said yes.', 'He agreed.', 1, ['0', '1'])
>>> GLUE_TASKS["mrpc"].metrics
('f1', 'accuracy')
"""

import csv
import dataclasses
import os

from keras_bert_suite.tasks.classifier.data import read_classification_file
from keras_bert_suite.tasks.classifier.metric import GLUE_METRICS


@dataclasses.dataclass(frozen=True)
class TsvLayout:
    """Where the columns are in one kind of GLUE file (names, or indices when header=False)."""

    text_column: object
    text_pair_column: object = None
    label_column: object = None
    header: bool = True


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task.

    labels: the label values as written in the TSV files, in id order (None: regression);
    class_names: readable names in the same order; directory: the task's folder in the GLUE
    download; splits: split name -> file name; labelled / unlabelled: the column layout of the
    labelled (train, dev) and unlabelled (test) files; metrics: GLUE's metric(s).
    """

    name: str
    directory: str
    labels: tuple
    class_names: tuple
    splits: dict
    labelled: TsvLayout
    unlabelled: TsvLayout
    metrics: tuple

    @property
    def num_classes(self):
        """1 for regression (STS-B), else the number of labels."""
        return 1 if self.labels is None else len(self.labels)

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def is_pair_task(self):
        return self.labelled.text_pair_column is not None


_SPLITS = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
_MNLI_SPLITS = {"train": "train.tsv",
                "validation_matched": "dev_matched.tsv",
                "validation_mismatched": "dev_mismatched.tsv",
                "test_matched": "test_matched.tsv",
                "test_mismatched": "test_mismatched.tsv"}
_BINARY = ("0", "1")
_NLI = ("entailment", "neutral", "contradiction")
_TWO_WAY_NLI = ("entailment", "not_entailment")


def _task(name, directory, labels, class_names, labelled, unlabelled, splits=None):
    return GlueTask(name=name, directory=directory, labels=labels, class_names=class_names,
                    splits=splits or _SPLITS, labelled=labelled, unlabelled=unlabelled,
                    metrics=GLUE_METRICS[name])


GLUE_TASKS = {task.name: task for task in [
    # CoLA train/dev: no header; source, label, original judgement, sentence.
    _task("cola", "CoLA", _BINARY, ("unacceptable", "acceptable"),
          TsvLayout(3, None, 1, header=False), TsvLayout("sentence")),
    _task("sst2", "SST-2", _BINARY, ("negative", "positive"),
          TsvLayout("sentence", None, "label"), TsvLayout("sentence")),
    _task("mrpc", "MRPC", _BINARY, ("not_equivalent", "equivalent"),
          TsvLayout("#1 String", "#2 String", "Quality"), TsvLayout("#1 String", "#2 String")),
    _task("stsb", "STS-B", None, None,
          TsvLayout("sentence1", "sentence2", "score"), TsvLayout("sentence1", "sentence2")),
    _task("qqp", "QQP", _BINARY, ("not_duplicate", "duplicate"),
          TsvLayout("question1", "question2", "is_duplicate"),
          TsvLayout("question1", "question2")),
    _task("mnli", "MNLI", _NLI, _NLI,
          TsvLayout("sentence1", "sentence2", "gold_label"), TsvLayout("sentence1", "sentence2"),
          splits=_MNLI_SPLITS),
    _task("qnli", "QNLI", _TWO_WAY_NLI, _TWO_WAY_NLI,
          TsvLayout("question", "sentence", "label"), TsvLayout("question", "sentence")),
    _task("rte", "RTE", _TWO_WAY_NLI, _TWO_WAY_NLI,
          TsvLayout("sentence1", "sentence2", "label"), TsvLayout("sentence1", "sentence2")),
    _task("wnli", "WNLI", _BINARY, ("not_entailment", "entailment"),
          TsvLayout("sentence1", "sentence2", "label"), TsvLayout("sentence1", "sentence2")),
    # The diagnostic set: test only, scored with MNLI's labels (a model trained on MNLI).
    _task("ax", "diagnostic", _NLI, _NLI, TsvLayout("sentence1", "sentence2"),
          TsvLayout("sentence1", "sentence2"), splits={"test": "diagnostic.tsv"}),
]}

_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "diagnostic": "ax"}


def get_glue_task(name):
    """The `GlueTask` for "cola", "sst2", ... (case-insensitive; "SST-2", "STS-B" work too)."""
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {name!r}; the tasks are {sorted(GLUE_TASKS)}.")
    return GLUE_TASKS[key]


def glue_file(task, data_dir, split):
    """Path of a split's TSV: `data_dir` is the GLUE root (with CoLA/, SST-2/, ...) or the task's
    own directory."""
    task = get_glue_task(task) if isinstance(task, str) else task
    if split not in task.splits:
        raise ValueError(f"GLUE {task.name} has no split {split!r}; its splits are "
                         f"{list(task.splits)}.")
    file_name = task.splits[split]
    candidates = [os.path.join(data_dir, task.directory, file_name),
                  os.path.join(data_dir, file_name)]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"GLUE {task.name} {split} file not found; looked for "
                            f"{' and '.join(candidates)}.")


def read_glue(task, data_dir, split):
    """Reads a GLUE split into `ClassificationExamples` with the task's label ids.

    Test splits (no labels) give `labels=None`. STS-B labels are float scores.
    """
    task = get_glue_task(task) if isinstance(task, str) else task
    path = glue_file(task, data_dir, split)
    unlabelled = split.startswith("test")
    layout = task.unlabelled if unlabelled else task.labelled
    return read_classification_file(
        path, text_column=layout.text_column, text_pair_column=layout.text_pair_column,
        label_column=layout.label_column, label_names=task.labels,
        regression=task.is_regression, format="tsv", header=layout.header,
        quoting=csv.QUOTE_NONE)
