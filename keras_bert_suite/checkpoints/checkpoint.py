"""The format-neutral result of reading any checkpoint."""

import dataclasses


@dataclasses.dataclass
class Checkpoint:
    """What every reader returns.

    config: BertEncoder keyword arguments.
    weights: {canonical weight name: numpy array} (see weight_table.py), or None when
        only the architecture was asked for. Pretraining-head weights, when the checkpoint has
        them, use the `mlm/...` and `nsp/...` names.
    format: "ours", "huggingface", "google_bert", "model_garden", "keras_hub" or
        "builtin".
    task_head: a transformers or KerasHub task model's head, when it has one.
    directory: the directory the checkpoint was read from, where its tokenizer's files are
        (a tokenizer class reads them: text/tokenizer_files.py); None for an
        architecture-only built-in preset.
    """

    config: dict
    weights: dict
    format: str
    task_head: dict = None
    directory: str = None
