"""The format-neutral result of reading any checkpoint."""

import dataclasses


@dataclasses.dataclass
class Checkpoint:
    """What every reader returns.

    config: BertEncoder keyword arguments.
    weights: {canonical weight name: numpy array} (see weight_table.py), or None when
        only the architecture was asked for. Pretraining-head weights, when the checkpoint has
        them, use the `mlm/...` and `nsp/...` names.
    vocabulary_path: the checkpoint's vocab.txt, or None.
    lowercase: whether the vocabulary expects lower-cased, accent-stripped text.
    format: "ours", "huggingface", "google_bert", "model_garden", "keras_hub" or
        "builtin".
    """

    config: dict
    weights: dict
    vocabulary_path: str
    lowercase: bool
    format: str
    task_head: dict = None
