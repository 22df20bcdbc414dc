"""EncoderConfig: the encoder's arguments, written once.

`BertEncoder`'s signature, attributes and `get_config`, the checks of a family's values, and the
keys a checkpoint's config maps to (`checkpoints/bert_config.py`) all read this one dataclass:
a new argument is one field here, with its default, its doc and its roles.

Roles (a field's `metadata["roles"]`):
* "checkpoint": an architecture value that checkpoint configs carry (`CHECKPOINT_KEYS`);
* "family": one whose BERT value a format without the key implies (`FAMILY_DEFAULTS`);
* "keras": handed to Keras (the dtype policy), not stored as an attribute of the encoder.

>>> config = EncoderConfig(vocabulary_size=100, num_layers=4, num_heads=2, hidden_dim=32,
...                        intermediate_dim=64, num_layer_groups=1)
>>> config.layer_schedule, config.block_num_heads
([[0], [0], [0], [0]], [2])
"""

import dataclasses
import inspect
import numbers

POOLER_ACTIVATIONS = ("tanh", "gelu", "relu")


def _field(doc, *roles, default=dataclasses.MISSING):
    return dataclasses.field(default=default, metadata={"doc": doc, "roles": roles})


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """The encoder's configuration (every argument of `BertEncoder`), checked when made."""

    vocabulary_size: int = _field("Rows of the token embedding table (V).", "checkpoint")
    num_layers: int = _field("Transformer layers (L).", "checkpoint")
    num_heads: int = _field("Attention heads per layer (N); hidden_dim must be a multiple.",
                            "checkpoint")
    hidden_dim: int = _field("Width of the hidden states (H).", "checkpoint")
    intermediate_dim: int = _field("Feed-forward width (I).", "checkpoint")
    max_sequence_length: int = _field("Rows of the position table (P).", "checkpoint",
                                      default=512)
    num_segments: int = _field(
        "Rows of the segment table: 2 (BERT), 1 (RoBERTa), 0 for none (DistilBERT).",
        "checkpoint", default=2)
    dropout: float = _field("Dropout rate of hidden states and attention probabilities.",
                            "checkpoint", default=0.1)
    layer_norm_epsilon: float = _field(
        "LayerNorm epsilon; the released BERT checkpoints were trained with 1e-12.",
        "checkpoint", default=1e-12)
    initializer_range: float = _field("Standard deviation of the truncated-normal initializer.",
                                      "checkpoint", default=0.02)
    return_hidden_states: bool = _field(
        "Also output `hidden_states` [B, L + 1, T, H]: the embeddings and every layer's output.",
        default=False)
    lora_rank: int = _field("None, or the rank of LoRA adapters to enable (`enable_lora`).",
                            default=None)
    lora_alpha: float = _field("LoRA scale numerator: adapters scaled by alpha / rank.",
                               default=None)
    dtype: object = _field("The Keras dtype policy (e.g. 'mixed_bfloat16').", "keras",
                           default=None)
    layer_num_heads: list = _field(
        "None, or each block's number of heads (what pruning produces).", default=None)
    layer_intermediate_dims: list = _field(
        "None, or each block's feed-forward width (what pruning produces).", default=None)
    embedding_dim: int = _field(
        "None (embeddings H wide), or E: embeddings E wide, then a dense E -> H (ALBERT, "
        "ELECTRA).", "checkpoint", "family", default=None)
    position_offset: int = _field(
        "0 (BERT), or k: positions count real tokens from row k of a table of "
        "max_sequence_length + k rows (RoBERTa: 2).", "checkpoint", "family", default=0)
    activation: str = _field(
        "The feed-forward GELU: 'gelu' (exact erf) or 'gelu_approximate' (tanh, ALBERT).",
        "checkpoint", "family", default="gelu")
    pooler_activation: str = _field(
        "'tanh' (BERT, ALBERT, RoBERTa's head), 'gelu' (ELECTRA's) or 'relu' (DistilBERT's).",
        "checkpoint", "family", default="tanh")
    num_layer_groups: int = _field(
        "None, or ALBERT's shared layers: layer i runs group int(i / (L / groups)).",
        "checkpoint", "family", default=None)
    layers_per_group: int = _field("Blocks per group of shared layers (1 unless grouped).",
                                   "checkpoint", "family", default=1)
    causal: bool = _field("A token attends to itself and earlier tokens only (left-to-right "
                          "LM).", default=False)
    block: str = _field(
        "The kind of transformer block the encoder stacks (`layers/blocks/`): 'bert', the "
        "post-LayerNorm block of BERT and its family.", default="bert")
    block_options: dict = _field(
        "None, or the block kind's own settings as a dict, checked by the kind's options "
        "dataclass (`EncoderPieces.options`; BERT has none).", default=None)

    def __post_init__(self):
        _check_family_values(self)
        for name in ("layer_num_heads", "layer_intermediate_dims"):
            object.__setattr__(self, name, _per_block(name, getattr(self, name),
                                                      self.num_blocks))
        object.__setattr__(self, "causal", bool(self.causal))
        if self.block_options is not None:
            if not isinstance(self.block_options, dict):
                raise ValueError(f"block_options must be None or a dict, got "
                                 f"{self.block_options!r}.")
            object.__setattr__(self, "block_options", dict(self.block_options) or None)
        if self.hidden_dim % self.num_heads:
            raise ValueError(f"hidden_dim ({self.hidden_dim}) must be divisible by num_heads "
                             f"({self.num_heads}).")

    # === What the encoder builds from it ===

    @property
    def num_blocks(self):
        """The distinct transformer blocks: num_layers, or ALBERT's groups x blocks each."""
        if self.num_layer_groups is None:
            return self.num_layers
        return self.num_layer_groups * self.layers_per_group

    @property
    def layer_schedule(self):
        """For each layer, the blocks it runs: its own block without sharing, else ALBERT's
        group int(i / (num_layers / num_layer_groups)), whose `layers_per_group` blocks run
        one after the other (transformers' AlbertTransformer)."""
        if self.num_layer_groups is None:
            return [[index] for index in range(self.num_layers)]
        return [[int(index / (self.num_layers / self.num_layer_groups))
                 * self.layers_per_group + inner for inner in range(self.layers_per_group)]
                for index in range(self.num_layers)]

    @property
    def head_dim(self):
        """Every head's width: hidden_dim // num_heads (pruning keeps it)."""
        return self.hidden_dim // self.num_heads

    @property
    def block_num_heads(self):
        return self.layer_num_heads or [self.num_heads] * self.num_blocks

    @property
    def block_intermediate_dims(self):
        return self.layer_intermediate_dims or [self.intermediate_dim] * self.num_blocks

    # === The argument list, for the encoder and the checkpoint maps ===

    @classmethod
    def names(cls, role=None):
        """The field names in signature order, those with `role` only when given."""
        return tuple(field.name for field in dataclasses.fields(cls)
                     if role is None or role in field.metadata["roles"])

    @classmethod
    def from_arguments(cls, args, kwargs):
        """(config, the rest of kwargs) from a call's positional and keyword arguments."""
        names = cls.names()
        if len(args) > len(names):
            raise TypeError(f"At most {len(names)} positional arguments ({', '.join(names)}), "
                            f"got {len(args)}.")
        values = dict(zip(names, args))
        rest = {}
        for key, value in kwargs.items():
            if key not in names:
                rest[key] = value
            elif key in values:
                raise TypeError(f"Argument {key!r} given by position and by name.")
            else:
                values[key] = value
        return cls(**values), rest

    def to_dict(self, role=None):
        return {name: getattr(self, name) for name in self.names(role)}

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    @classmethod
    def signature(cls, first=(), last=()):
        """An `inspect.Signature` of the fields, between parameters `first` and `last`."""
        fields = [inspect.Parameter(
            field.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if field.default is dataclasses.MISSING
            else field.default) for field in dataclasses.fields(cls)]
        return inspect.Signature([*first, *fields, *last])

    @classmethod
    def argument_docs(cls, indent="    "):
        """One line per field: `name=default: doc`, for docstrings."""
        lines = []
        for field in dataclasses.fields(cls):
            default = "" if field.default is dataclasses.MISSING else f"={field.default!r}"
            lines.append(f"{indent}{field.name}{default}: {field.metadata['doc']}")
        return "\n".join(lines)


# The architecture keys of a checkpoint's config (`Checkpoint.config`), and the family values a
# format without them implies (BERT's).
CHECKPOINT_KEYS = EncoderConfig.names("checkpoint")
FAMILY_DEFAULTS = {field.name: field.default for field in dataclasses.fields(EncoderConfig)
                   if "family" in field.metadata["roles"]}

EncoderConfig.__doc__ += "\n\nArguments:\n" + EncoderConfig.argument_docs()


def _is_count(value, least):
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= least


def _check_family_values(config):
    if not _is_count(config.num_layers, 0):
        raise ValueError(f"num_layers must be a non-negative integer, got "
                         f"{config.num_layers!r}.")
    if not _is_count(config.num_segments, 0):
        raise ValueError(f"num_segments must be 0 (no segment embeddings, DistilBERT) or "
                         f"more, got {config.num_segments!r}.")
    if config.embedding_dim is not None and not _is_count(config.embedding_dim, 1):
        raise ValueError(f"embedding_dim must be None (embeddings as wide as hidden_dim) or a "
                         f"positive integer (ALBERT: 128), got {config.embedding_dim!r}.")
    if not _is_count(config.position_offset, 0):
        raise ValueError(f"position_offset must be 0 (BERT) or a positive integer (RoBERTa: "
                         f"2, its pad id + 1), got {config.position_offset!r}.")
    if config.pooler_activation not in POOLER_ACTIVATIONS:
        raise ValueError(f"pooler_activation must be one of {POOLER_ACTIVATIONS}, got "
                         f"{config.pooler_activation!r}.")
    groups = config.num_layer_groups
    if groups is not None and not (_is_count(groups, 1) and groups <= config.num_layers):
        raise ValueError(f"num_layer_groups must be None (no shared layers) or between 1 and "
                         f"num_layers={config.num_layers} (ALBERT: 1), got {groups!r}.")
    if not _is_count(config.layers_per_group, 1) or (
            groups is None and config.layers_per_group != 1):
        raise ValueError(f"layers_per_group must be a positive integer, and 1 unless "
                         f"num_layer_groups is set; got {config.layers_per_group!r}.")


def _per_block(name, sizes, num_blocks):
    """None, or `sizes` checked to be `num_blocks` positive integers (one per block)."""
    if sizes is None:
        return None
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__"):
        raise ValueError(f"{name} must be None or a list of {num_blocks} positive integers "
                         f"(one per transformer layer), got {sizes!r}.")
    sizes = list(sizes)
    if len(sizes) != num_blocks:
        raise ValueError(f"{name} has {len(sizes)} entries but the encoder has {num_blocks} "
                         f"transformer blocks (num_layers, or num_layer_groups x "
                         f"layers_per_group where layers are shared): give one size per "
                         f"block (or None for the same size in every layer).")
    for index, size in enumerate(sizes):
        if not _is_count(size, 1):
            raise ValueError(f"{name}[{index}] is {size!r}: layer {index} needs a positive "
                             f"integer (every layer keeps at least one head and one "
                             f"feed-forward neuron).")
    return [int(size) for size in sizes]


def with_config_arguments(cls):
    """Class decorator for a model whose `__init__(self, *args, **kwargs)` reads an
    EncoderConfig (`EncoderConfig.from_arguments`) and keeps it as `self.config`: its
    signature shows the fields (help, inspect), each field but the dtype policy (Keras' own
    `dtype`) reads as an attribute, and its docstring lists the arguments."""
    for name in EncoderConfig.names():
        if "keras" not in _roles(name):
            setattr(cls, name, property(lambda self, name=name: getattr(self.config, name),
                                        doc=_doc(name)))
    parameter = inspect.Parameter
    cls.__init__.__signature__ = EncoderConfig.signature(
        first=[parameter("self", parameter.POSITIONAL_OR_KEYWORD)],
        last=[parameter("kwargs", parameter.VAR_KEYWORD)])
    cls.__doc__ = (cls.__doc__ or "") + "\n    Arguments (`EncoderConfig`):\n" + \
        EncoderConfig.argument_docs(indent="    * ")
    return cls


def _field_named(name):
    return next(field for field in dataclasses.fields(EncoderConfig) if field.name == name)


def _roles(name):
    return _field_named(name).metadata["roles"]


def _doc(name):
    return _field_named(name).metadata["doc"]
