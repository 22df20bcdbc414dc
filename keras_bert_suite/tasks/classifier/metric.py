"""Classification and regression metrics as plain numpy functions, and the GLUE metric set.

Definitions follow scikit-learn / scipy (what the GLUE leaderboard and Hugging Face's `evaluate`
use): F1 of the positive class (binary) or the unweighted mean over classes (macro), a
degenerate F1 or Matthews correlation is 0, a constant input makes Pearson/Spearman NaN.

Example:
>>> accuracy([1, 0, 1], [1, 1, 1])
0.6666666666666666
>>> logits = np.array([[0.1, 2.0], [1.5, -1.0], [0.3, 0.2], [-0.5, 0.5]])
>>> glue_metrics("mrpc", logits, [1, 0, 1, 1])  # logits [N, 2] or class ids [N]
{'f1': 0.8, 'accuracy': 0.75}
"""

import numpy as np


def accuracy(predictions, labels):
    """Fraction of predictions equal to the labels."""
    predictions, labels = _pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels, average="binary", positive_label=1):
    """F1 = 2PR / (P + R).

    average="binary": of `positive_label`; "macro": unweighted mean over the classes that
    occur in labels or predictions. A class never predicted and never present has F1 0.
    """
    predictions, labels = _pair(predictions, labels)
    if average == "binary":
        return _class_f1(predictions, labels, positive_label)
    if average == "macro":
        classes = np.union1d(predictions, labels)
        return float(np.mean([_class_f1(predictions, labels, c) for c in classes]))
    raise ValueError(f"average must be 'binary' or 'macro', got {average!r}.")


def matthews_corrcoef(predictions, labels):
    """Matthews correlation coefficient; the multi-class form (Gorodkin's R_K) for > 2 classes.

    0 when it is undefined (all predictions or all labels one class), as in scikit-learn.
    """
    predictions, labels = _pair(predictions, labels)
    classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    n, k = len(labels), len(classes)
    confusion = np.zeros((k, k), dtype=np.float64)  # [true class, predicted class]
    np.add.at(confusion, (codes[:n], codes[n:]), 1)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    correct = np.trace(confusion)
    covariance = correct * n - true_counts @ predicted_counts
    denominator = np.sqrt((n * n - predicted_counts @ predicted_counts)
                          * (n * n - true_counts @ true_counts))
    return float(covariance / denominator) if denominator > 0 else 0.0


def pearson(predictions, labels):
    """Pearson correlation of two float vectors (NaN when either is constant)."""
    x, y = _pair(predictions, labels, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denominator) if denominator > 0 else float("nan")


def spearman(predictions, labels):
    """Spearman rank correlation: Pearson of the ranks, ties sharing their average rank."""
    x, y = _pair(predictions, labels, dtype=np.float64)
    return pearson(average_ranks(x), average_ranks(y))


def average_ranks(values):
    """1-based ranks; tied values get the mean of their positions (scipy's rankdata "average")."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_group = np.r_[True, ordered[1:] != ordered[:-1]]
    group = np.cumsum(starts_group) - 1  # group index of every sorted position
    counts = np.bincount(group)
    first_position = np.cumsum(counts) - counts  # 0-based position where each group starts
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = (first_position + (counts + 1) / 2.0)[group]
    return ranks


# The GLUE benchmark's metric(s) per task (GLUE paper, Table 1; AX is MNLI-labelled and scored
# with the 3-class Matthews correlation).
GLUE_METRICS = {
    "cola": ("matthews_corrcoef",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "stsb": ("pearson", "spearman"),
    "qqp": ("f1", "accuracy"),
    "mnli": ("accuracy",),
    "mnli_matched": ("accuracy",),
    "mnli_mismatched": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "ax": ("matthews_corrcoef",),
}

_METRIC_FUNCTIONS = {
    "accuracy": accuracy,
    "f1": f1_score,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def glue_metrics(task, predictions, labels):
    """{metric name: value} for a GLUE task.

    predictions: class ids [N] or scores/logits [N, num_classes] (arg-maxed); for "stsb"
    regression scores [N] or [N, 1]. labels: class ids [N] (float scores for stsb).
    """
    task = task.lower().replace("-", "")
    if task not in GLUE_METRICS:
        raise ValueError(f"Unknown GLUE task {task!r}; known tasks are {sorted(GLUE_METRICS)}.")
    predictions = np.asarray(predictions)
    if task == "stsb":
        if predictions.ndim == 2 and predictions.shape[1] == 1:
            predictions = predictions[:, 0]
    elif predictions.ndim == 2:
        predictions = np.argmax(predictions, axis=-1)
    return {name: _METRIC_FUNCTIONS[name](predictions, labels) for name in GLUE_METRICS[task]}


def _class_f1(predictions, labels, positive):
    true_positive = np.sum((predictions == positive) & (labels == positive))
    predicted = np.sum(predictions == positive)
    actual = np.sum(labels == positive)
    return float(2 * true_positive / (predicted + actual)) if predicted + actual else 0.0


def _pair(predictions, labels, dtype=None):
    predictions = np.asarray(predictions, dtype=dtype)
    labels = np.asarray(labels, dtype=dtype)
    if predictions.ndim != 1 or labels.ndim != 1:
        raise ValueError(f"predictions and labels must be 1-D, got shapes {predictions.shape} and "
                         f"{labels.shape}. Take the argmax of logits first.")
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels; they must "
                         "match one to one.")
    if len(labels) == 0:
        raise ValueError("No predictions: metrics need at least one example.")
    return predictions, labels
