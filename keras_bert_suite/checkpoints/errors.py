"""The errors checkpoint readers raise; each message says what was expected and where."""


class CheckpointMismatchError(ValueError):
    """A checkpoint's weights do not fit the model its config describes (missing or mis-shaped)."""


class UnknownCheckpointFormatError(ValueError):
    """A path that none of the supported checkpoint formats recognises."""


class UnknownPresetError(UnknownCheckpointFormatError):
    """A `from_preset` argument that is neither a built-in preset name nor an existing path."""


class UnsupportedCheckpointError(ValueError):
    """A recognised format holding a model BertEncoder cannot run (not BERT, other activation)."""
