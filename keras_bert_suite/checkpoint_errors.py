"""The errors of reading a checkpoint or resolving a preset (families/, checkpoints/ and
presets/ raise them; keras_bert_suite.checkpoints hands them on); each message says what was
expected and where."""


class CheckpointMismatchError(ValueError):
    """A checkpoint's weights do not fit the model its config describes (missing or mis-shaped)."""


class UnknownCheckpointFormatError(ValueError):
    """A path that none of the supported checkpoint formats recognises."""


class UnknownPresetError(UnknownCheckpointFormatError):
    """A `from_preset` argument that is neither a built-in preset name nor an existing path."""


class UnsupportedCheckpointError(ValueError):
    """A recognised format holding a model BertEncoder cannot run (not BERT, other activation)."""
