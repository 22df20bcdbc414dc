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
    directory: the directory the checkpoint was read from, where its tokenizer's files are
        (a tokenizer class reads them: text/tokenizer_files.py); None for an
        architecture-only built-in preset.
    head_reader: (a task's `task_heads.CheckpointForm`) -> its head in this checkpoint, or
        None; see `task_head`.
    """

    config: dict
    weights: dict
    format: str
    directory: str = None
    head_reader: object = None

    def task_head(self, form):
        """The head of the task model whose checkpoint form is `form` when this checkpoint is
        that task fine-tuned elsewhere (transformers' BertFor*, KerasHub's TextClassifier),
        else None: {"kernel", "bias", "label_names", "pooler": {our pooler weights, where
        the task class keeps the pooler outside the base model}}. Read on demand, since the
        task declares where its head is."""
        return None if self.head_reader is None or form is None else self.head_reader(form)
