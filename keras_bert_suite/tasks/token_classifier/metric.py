"""Entity-level NER metrics (precision, recall, F1 over whole entities), computed by seqeval.

An entity counts as found only when its type and its exact word span match a gold entity,
as in the CoNLL shared tasks' conlleval script (which seqeval's default mode reproduces).
Inputs are tags per word, one list per sentence (what `BertTokenClassifier.predict` gives per sentence).
"""

from seqeval import metrics
from seqeval import scheme as seqeval_scheme

SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")


def entity_scores(y_true, y_pred, scheme=None):
    """Overall (micro-averaged) and per-type entity precision, recall and F1.

    Args:
        y_true, y_pred: lists of sentences, each a list of tags ("O", "B-person", ...);
            sentence i of both must have the same number of tags.
        scheme: None for conlleval's lenient chunking (an I- tag after O starts an entity;
            works for IOB1 and IOB2 alike), or one of SCHEMES for seqeval's strict mode, in
            which ill-formed chunks are not entities.

    Returns:
        {"precision", "recall", "f1", "support": number of gold entities,
         "per_type": {type: {"precision", "recall", "f1", "support"}}}, floats in [0, 1]
        (0 where a ratio has no denominator).

    Example:
    >>> entity_scores([["B-person", "I-person", "O"]], [["B-person", "O", "O"]])["f1"]
    0.0
    """
    report = metrics.classification_report(
        *_checked(y_true, y_pred), output_dict=True, zero_division=0, **_mode(scheme))
    overall = report.pop("micro avg")
    for summary in ("macro avg", "weighted avg"):
        report.pop(summary, None)
    return {
        **_as_floats(overall),
        "per_type": {name: _as_floats(values) for name, values in sorted(report.items())},
    }


def classification_report(y_true, y_pred, scheme=None, digits=4):
    """seqeval's text report: one row per entity type, then micro/macro/weighted averages.

    >>> gold_tags = [["B-person", "I-person", "O", "B-geo-loc"]]
    >>> predicted_tags = [["B-person", "I-person", "O", "O"]]
    >>> print(classification_report(gold_tags, predicted_tags))
                  precision    recall  f1-score   support
    <BLANKLINE>
         geo-loc     0.0000    0.0000    0.0000         1
          person     1.0000    1.0000    1.0000         1
    <BLANKLINE>
       micro avg     1.0000    0.5000    0.6667         2
       macro avg     0.5000    0.5000    0.5000         2
    weighted avg     0.5000    0.5000    0.5000         2
    <BLANKLINE>
    """
    return metrics.classification_report(
        *_checked(y_true, y_pred), digits=digits, zero_division=0, **_mode(scheme))


def _mode(scheme):
    if scheme is None:
        return {}
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be None (conlleval's lenient chunking) or one of "
                         f"{SCHEMES}, got {scheme!r}.")
    return {"mode": "strict", "scheme": getattr(seqeval_scheme, scheme)}


def _as_floats(values):
    return {"precision": float(values["precision"]), "recall": float(values["recall"]),
            "f1": float(values["f1-score"]), "support": int(values["support"])}


def _checked(y_true, y_pred):
    """Validates the shapes seqeval would otherwise silently zip past or fail on deep inside."""
    for name, tags in (("y_true", y_true), ("y_pred", y_pred)):
        if isinstance(tags, str) or not all(
                isinstance(sentence, (list, tuple)) and all(isinstance(t, str) for t in sentence)
                for sentence in tags):
            raise ValueError(f"{name} must be a list of sentences, each a list of tag strings "
                             "(e.g. [['B-person', 'O'], ['O']]).")
    y_true, y_pred = [list(s) for s in y_true], [list(s) for s in y_pred]
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} sentences but y_pred has {len(y_pred)}.")
    for i, (gold, predicted) in enumerate(zip(y_true, y_pred)):
        if len(gold) != len(predicted):
            raise ValueError(f"sentence {i}: {len(gold)} gold tags but {len(predicted)} predicted "
                             "tags; predict one tag per word (BertTokenClassifier.predict does).")
    if not any(y_true):
        raise ValueError("y_true has no tags; nothing to score.")
    return y_true, y_pred
