"""BertEncoder: the BERT backbone (embeddings, N transformer blocks, pooler), configured per
family (RoBERTa, XLM-R, DistilBERT, ELECTRA, ALBERT: see keras_bert_suite/families/)."""

from typing import NamedTuple

import keras
from keras import ops

from keras_bert_suite.encoder_config import EncoderConfig, with_config_arguments
from keras_bert_suite.layers import BertEmbeddings
from keras_bert_suite.layers.blocks import MODEL_AXIS, block_kind
from keras_bert_suite.layers.blocks.encoder_pieces import EncoderPieces, checked_options
from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.models import lora, quantization, schedule, weight_names
from keras_bert_suite.layers.initializer import BertInitializer


class EncoderParts(NamedTuple):
    """The layers of an encoder and the order they run in: what `_encode` computes with
    (the functional graph is built from it before the model exists)."""

    embeddings: keras.layers.Layer
    embedding_projection: object  # Dense E -> H, or None
    blocks: list  # the distinct transformer blocks (shared ones once)
    layer_blocks: list  # per layer, the indices into `blocks` it runs, in order
    pooler: keras.layers.Layer
    causal: bool = False  # a query sees no later position (left-to-right LM)
    config: object = None  # the EncoderConfig (the block kind's pieces read it)
    pieces: EncoderPieces = EncoderPieces()  # what the block kind adds around its blocks
    shared: dict = {}  # the layers the kind builds once per encoder ({module: layer})


def _encode(parts, inputs, rows=None, training=None, before_block=None):
    """The encoder's forward pass (`schedule.encode` over its Keras layers): the functional
    graph, `encode_at` and distillation (which reads the hidden states) are this call.

    training: None follows the caller (Keras' call context); a bool sets it for every layer
    here and for the layers the caller runs next (Keras keeps it in the context).
    rows, before_block and the result: see `schedule.encode` (x [B, T, H] here; the context
    is the block kind's, `EncoderPieces.context`: BERT's attention mask [B, 1, T, T]).
    """
    return schedule.encode(_KerasStages(parts, training), inputs, rows, before_block)


class _KerasStages:
    """An encoder's Keras layers as `schedule.encode` runs them."""

    def __init__(self, parts, training):
        self.parts = parts
        self.layer_blocks = parts.layer_blocks
        # An explicit training=None would reset the context (dropout off): pass only a bool.
        self.call_options = {} if training is None else {"training": training}

    def embed(self, inputs):
        x = self.parts.embeddings(inputs["token_ids"], inputs["segment_ids"],
                                  inputs["padding_mask"], **self.call_options)  # [B, T, E]
        if self.parts.embedding_projection is not None:
            x = self.parts.embedding_projection(x)  # [B, T, H]
        return x

    def context(self, inputs):
        return self.parts.pieces.context(self.parts, inputs)

    def block(self, index, x, context, rows):
        if rows is None:
            return self.parts.blocks[index](x, context)
        return self.parts.blocks[index](x, context, positions=rows)  # [B, R, H]

    def gather(self, x, rows):
        return gather_rows(x, rows)

    def finish(self, x):
        return self.parts.pieces.finish(self.parts, x)

    def pool(self, x, inputs):
        return self.parts.pieces.pool(self.parts, x, inputs)


def _check_model_parallel_split(config, kind):
    """Under a keras.distribution.ModelParallel whose layout map splits a block's prunable
    units (attention heads, feed-forward neurons: `BertEncoder.get_layout_map`), every
    block's count must be a multiple of that mesh axis' size: a clear error here, not a
    sharding error later."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return
    mesh = distribution.device_mesh
    for index in range(config.num_blocks):
        for units in kind.units.values():
            size = _unit_count(config, units, index)
            for template, (axis, _) in units.axes.items():
                path = f"{BLOCK_PREFIX}{index}/{template}"
                # ModelParallel: its LayoutMap's entry for `path` (the lookup its variables
                # get); DataParallel: None, it splits nothing.
                layout = distribution.get_tensor_layout(path)
                name = None if layout is None or len(layout.axes) <= axis else layout.axes[axis]
                if name is None:
                    continue
                devices = mesh.shape[list(mesh.axis_names).index(name)]
                if size % devices:
                    raise ValueError(
                        f"Layer {index} has {size} {units.noun}, which the '{name}' mesh axis "
                        f"({devices} devices) cannot split evenly ({path}). Use a "
                        f"model-parallel size that divides every layer's count, or prune to "
                        f"multiples of {devices} (layer_num_heads / layer_intermediate_dims).")


def _unit_count(config, units, index):
    """Block `index`'s number of `units` from the config (before the block exists)."""
    per_block = getattr(config, units.config_key)
    return per_block[index] if per_block is not None else getattr(config, units.default_key)


# Block i's Keras name (its variables' paths begin with it).
BLOCK_PREFIX = "transformer_layer_"


@keras.saving.register_keras_serializable(package="keras_bert_suite")
@with_config_arguments
class BertEncoder(quantization.QuantizableModel, keras.Model):
    """The BERT encoder as a functional Keras model, and its family's as configurations.

    Inputs (a dict): `token_ids`, `segment_ids`, `padding_mask`, each [B, T] integers
    (`padding_mask` is 1 for real tokens, 0 for padding; a packed row numbers its instances
    1, 2, ... K instead: each attends to itself only and restarts its positions, see
    `keras_bert_suite.layers.packed_rows`).
    Outputs (a dict): `sequence_output` [B, T, H], `pooled_output` [B, H] (the pooler dense
    on [CLS]; the block kind's pooler, `EncoderPieces`) and, when `return_hidden_states=True`, `hidden_states` [B, L + 1, T, H] —
    the embedding output followed by every layer's output (with ALBERT's `layers_per_group`
    > 1, every block's: L x layers_per_group + 1, as transformers returns them).

    Example:
    >>> from keras_bert_suite import BertPreprocessor
    >>> encoder = BertEncoder.from_preset("minilm_l6_h384_uncased")  # real pretrained weights
    >>> preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=16)
    >>> outputs = encoder(preprocessor(["The senate passed the bill."]))
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 16, 384), (1, 384))

    Per-layer sizes (what `keras_bert_suite.pruning` produces): `layer_num_heads` gives each
    layer's number of attention heads and `layer_intermediate_dims` its feed-forward width
    (None: `num_heads` and `intermediate_dim` in every layer). The head size stays
    hidden_dim // num_heads, so a layer with N' heads has a [H, 3, N', Dh] qkv kernel and a
    [N' Dh, H] attention output kernel.

    >>> small = BertEncoder(vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=32,
    ...                     intermediate_dim=64, layer_num_heads=[4, 1],
    ...                     layer_intermediate_dims=[64, 8])
    >>> tuple(small.transformer_layers[1].attention.qkv.kernel.shape)  # [H, 3, N', Dh]
    (32, 3, 1, 8)

    The family (`keras_bert_suite.models.families` has each one's values):
    * `embedding_dim`: embeddings E wide, then a dense projection E -> H (ALBERT, ELECTRA);
      None: H wide, no projection.
    * `num_segments=0`: no segment embeddings (DistilBERT); RoBERTa has one row.
    * `position_offset`: RoBERTa's positions count real tokens from the padding mask, from
      row `position_offset` (2) of a table of max_sequence_length + 2 rows.
    * `activation`: the feed-forward GELU, "gelu" (exact erf) or "gelu_approximate" (tanh,
      ALBERT).
    * `pooler_activation`: "tanh" (BERT, ALBERT, RoBERTa's classification head), "gelu"
      (ELECTRA's) or "relu" (DistilBERT's pre_classifier).
    * `num_layer_groups`, `layers_per_group`: ALBERT's shared layers: layer i runs group
      int(i / (num_layers / num_layer_groups)), a group being `layers_per_group` blocks.
      `transformer_layers` then holds the distinct blocks, and `layer_num_heads` /
      `layer_intermediate_dims` give one size per distinct block.
    * `block`, `block_options`: the kind of block (`layers/blocks/`): "bert", or
      "modernbert" (pre-norm GeGLU blocks, rotary global and sliding-window attention, a
      final norm, its prediction head as the pooler) with its `ModernBertOptions` as a dict.
    * `causal`: a token attends to itself and the tokens before it only (GPT-1's
      left-to-right LM, the BERT paper's "LTR" ablation; transformers' BertLMHeadModel with
      is_decoder=True). Pretrain it with next-token targets
      (`tasks/pretrainer/data/next_token.py`, `kbs pretrain pretrain_cpu_ltr`).

    >>> albert = BertEncoder(vocabulary_size=100, num_layers=4, num_heads=2, hidden_dim=32,
    ...                      intermediate_dim=64, embedding_dim=16, num_layer_groups=1,
    ...                      activation="gelu_approximate")
    >>> len(albert.transformer_layers), albert.layer_blocks
    (1, [[0], [0], [0], [0]])
    """

    # How transforms/find_encoder.py tells an encoder from a task without importing this
    # class (which would put the transforms under the encoder they transform).
    is_bert_encoder = True

    def __init__(self, *args, **kwargs):
        # The arguments are EncoderConfig's fields (the signature below is made from them);
        # the rest of kwargs (name, trainable) go to keras.Model.
        config, kwargs = EncoderConfig.from_arguments(args, kwargs)
        kind = block_kind(config.block)
        pieces = kind.encoder
        checked_options(pieces, config.block, config.block_options)
        _check_model_parallel_split(config, kind)
        policy = keras.dtype_policies.get(config.dtype) if config.dtype is not None else None
        hidden_dim = config.hidden_dim
        initializer = BertInitializer(stddev=config.initializer_range)
        embeddings = BertEmbeddings(
            config.vocabulary_size, config.max_sequence_length, config.num_segments,
            config.embedding_dim or hidden_dim, dropout=config.dropout,
            layer_norm_epsilon=config.layer_norm_epsilon,
            initializer_range=config.initializer_range,
            position_offset=config.position_offset, position_rows=pieces.position_rows,
            layer_norm_bias=pieces.embedding_norm_bias, dtype=policy, name="embeddings")
        projection = None
        if config.embedding_dim is not None:  # ALBERT / ELECTRA: narrower embeddings, then E -> H
            projection = keras.layers.Dense(
                hidden_dim, kernel_initializer=initializer, dtype=policy,
                name="embedding_projection")
        blocks = [kind.make(config, index, policy, f"{BLOCK_PREFIX}{index}")
                  for index in range(config.num_blocks)]
        shared = pieces.layers(config, policy)
        # The pooler is also where a family's classification head starts: RoBERTa's and
        # ELECTRA's dense + tanh / GELU on <s>, DistilBERT's pre_classifier + ReLU.
        pooler = pieces.pooler(config, policy)
        layer_blocks = config.layer_schedule
        parts = EncoderParts(embeddings, projection, blocks, layer_blocks, pooler,
                             config.causal, config, pieces, shared)

        # === Functional graph ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids,
                  "padding_mask": padding_mask}
        x, pooled, hidden_states = _encode(parts, inputs)
        outputs = {"sequence_output": x, "pooled_output": pooled}
        if config.return_hidden_states:
            outputs["hidden_states"] = ops.stack(hidden_states, axis=1)  # [B, L + 1, T, H]
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            dtype=policy,
            **kwargs,
        )

        self.embeddings = embeddings
        self.embedding_projection = projection
        self.transformer_layers = blocks
        self.pooler = pooler
        # The block kind's layers built once (`EncoderPieces.layers`), by module name.
        self.shared_layers = shared
        self.layer_blocks = layer_blocks
        # LoRA is enabled below (it checks the built layers), and recorded then.
        self._encoder_config = config.replace(lora_rank=None, lora_alpha=None)
        if config.lora_rank is not None:
            self.enable_lora(config.lora_rank, config.lora_alpha)

    @property
    def config(self):
        """The `EncoderConfig` this encoder was built with (its arguments)."""
        return self._encoder_config

    @property
    def block_kind(self):
        """The `BlockKind` of this encoder's blocks (`layers/blocks/`): what LoRA, pruning,
        int8 export, the layout map and the weight table ask about the blocks."""
        return block_kind(self.config.block)

    @property
    def parts(self):
        """The encoder's layers and their order (`EncoderParts`), for code that runs the
        forward pass itself (distillation reads every layer's hidden state)."""
        return EncoderParts(self.embeddings, self.embedding_projection,
                            self.transformer_layers, self.layer_blocks, self.pooler,
                            self.causal, self.config, self.block_kind.encoder,
                            self.shared_layers)

    def encode(self, inputs, training=None, before_block=None):
        """(sequence output [B, T, H], pooled output [B, H], hidden states: the embedding
        output and every layer's output), from one forward pass; `before_block(index, x,
        context)` sees each block's input and context (BERT's: the attention mask; shared
        blocks once per run)."""
        return _encode(self.parts, inputs, training=training, before_block=before_block)

    def block_at(self, layer):
        """The transformer block that layer `layer` (0-based) runs first (ALBERT's layers
        share their group's blocks)."""
        return self.transformer_layers[self.layer_blocks[layer][0]]

    def encode_at(self, inputs, positions):
        """The last layer's output at `positions` only, computed at those rows only.

        Returns {"gathered_output": [B, Q, H], "pooled_output": [B, H]}: exactly
        `self(inputs)["sequence_output"]` gathered at `positions` [B, Q] and the pooled
        output (its [CLS] row is computed too), for a caller that reads a few rows — the
        pretrainer's MLM head reads P ~ 0.15 T. The last layer's query projection, attention
        output, FFN and LayerNorms then run on Q + 1 rows instead of T (13% of a BERT-mini
        pretraining step's FLOPs). Usable on symbolic inputs, in a functional graph.
        """
        positions = ops.cast(positions, "int32")
        with_cls = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
        rows, pooled, _ = _encode(self.parts, inputs, rows=with_cls)  # rows: [B, 1 + Q, H], [CLS] first
        return {"gathered_output": rows[:, 1:], "pooled_output": pooled}

    @property
    def token_embedding(self):
        """The token embedding layer (the MLM decoder ties its weights to it)."""
        return self.embeddings.token_embedding

    @staticmethod
    def get_layout_map(device_mesh, model_parallel_dim_name="model", block="bert"):
        """A `keras.distribution.LayoutMap` that splits the encoder over the mesh's
        `model_parallel_dim_name` axis, Megatron-style (Shoeybi et al. 2019, section 3).

        Each device holds whole attention heads: the fused query/key/value kernel
        [H, 3, N, Dh] is split on its head axis N, and the attention output kernel [H, H] by
        rows, whose head-major order gives every device the same heads. The FFN's first
        kernel is split by columns and its second by rows. So each pair of matmuls needs one
        all-reduce, and attention itself runs per device on its own heads. The token and
        position embedding tables are split along H. Everything else (LayerNorms, the biases
        added after an all-reduce, the pooler, heads) is replicated. `num_heads`,
        `intermediate_dim` and `hidden_dim` must be multiples of the axis' size, and so must
        every entry of a pruned encoder's `layer_num_heads` / `layer_intermediate_dims`: an
        encoder built under the distribution checks this and names the layer that cannot be
        split.

        The blocks are split as their kind declares (`block`: the encoder's `block`;
        `BlockKind.layout`, BERT's in `layers/blocks/bert/`).

        On JAX (and TensorFlow's prototype; PyTorch has no keras.distribution), with the
        devices of this machine (4 accelerators, or 4 virtual CPU devices from
        `XLA_FLAGS=--xla_force_host_platform_device_count=4`):

        >>> import keras
        >>> devices = keras.distribution.list_devices()
        >>> mesh = keras.distribution.DeviceMesh((1, len(devices)), ("batch", "model"), devices)
        >>> layout_map = BertEncoder.get_layout_map(mesh)
        >>> layout_map["transformer_layer_0/attention/qkv/kernel"].axes  # [H, 3, N, Dh]
        (None, None, 'model', None)
        >>> distribution = keras.distribution.ModelParallel(
        ...     layout_map=layout_map, batch_dim_name="batch")
        >>> with distribution.scope():
        ...     encoder = BertEncoder.from_preset("minilm_l6_h384_uncased")
        """
        from keras import distribution as kd

        if model_parallel_dim_name not in device_mesh.axis_names:
            raise ValueError(
                f"The device mesh has axes {list(device_mesh.axis_names)}, without "
                f"'{model_parallel_dim_name}' to split the weights over: pass "
                "model_parallel_dim_name=<one of them>, or build the mesh with a "
                f"'{model_parallel_dim_name}' axis.")
        model = model_parallel_dim_name
        prefix = rf"(?:.*/)?{BLOCK_PREFIX}\d+"  # the path may sit under an outer model
        rules = {
            r"(?:.*/)?embeddings/token_embedding/embeddings": (None, model),  # [V, H]
            r"(?:.*/)?embeddings/position_embedding": (None, model),  # [P, H]
            **{f"{prefix}/{template}": tuple(model if axis == MODEL_AXIS else axis
                                             for axis in axes)
               for template, axes in block_kind(block).layout.items()},
        }
        layout_map = kd.LayoutMap(device_mesh)
        for pattern, axes in rules.items():
            layout_map[pattern] = axes
        return layout_map

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.layer_dtype_policy),
            **{name: value for name, value in self.config.to_dict().items() if name != "dtype"},
            **quantization.record(self),
        }

    @property
    def layer_dtype_policy(self):
        """The policy the encoder was built with, for a task's head layers too: the
        functional Model drops the one it was given, and quantized layers carry an int8
        one (the embeddings block keeps the float policy)."""
        return self.embeddings.dtype_policy

    @property
    def is_pruned(self):
        """True when some layer has its own number of heads or feed-forward width."""
        return self.layer_num_heads is not None or self.layer_intermediate_dims is not None

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        quantized = config.pop(quantization.CONFIG_KEY, None)
        encoder = cls(**config)
        quantization.restore(encoder, quantized)
        return encoder

    # === Parameter-efficient fine-tuning ===

    def enable_lora(self, rank, alpha=None):
        """LoRA (Hu et al. 2021): rank-`rank` adapters on every transformer layer's
        query/key/value, attention output and feed-forward projections; every other encoder
        weight is frozen. `alpha` scales the adapters by alpha / rank (default: rank, scale 1).

        The adapters start at zero (the function is unchanged) and travel in `.keras` files
        and task presets; exports (SavedModel, Hugging Face, Google BERT, KerasHub) and
        `weight_map()` hold the merged kernels W + alpha / rank * A B.

        >>> encoder = BertEncoder.from_preset("minilm_l6_h384_uncased")
        >>> encoder.enable_lora(8)
        >>> import math  # trained: 6 layers x 4 projections x rank x (inputs + outputs)
        >>> sum(math.prod(variable.shape) for variable in encoder.trainable_weights)
        294912
        """
        lora.enable(self, rank, alpha)
        self._encoder_config = self.config.replace(lora_rank=rank, lora_alpha=alpha)

    def has_lora_adapters(self):
        """The hook `quantize` asks (models/quantization.py): int8 cannot hold adapters."""
        return self.lora_rank is not None

    # === Weights by name (the checkpoint converters' common currency) ===

    def weight_map(self):
        """{canonical weight name: keras.Variable}; the names: checkpoints/weight_table.py."""
        return weight_names.encoder_variables(self)

    def load_weight_map(self, weights):
        """Assigns {canonical name: array}; names the first missing or mis-shaped weight."""
        weight_names.assign(self.weight_map(), weights, owner="BertEncoder")

    @classmethod
    def from_preset(cls, preset, load_weights=True, **overrides):
        """Builds an encoder from a built-in preset name or a checkpoint directory.

        `preset` is a built-in name (`keras_bert_suite.list_presets()`), a preset directory
        saved by `save_preset`, a Hugging Face BERT directory (`config.json` +
        `model.safetensors` / `pytorch_model.bin`), an original Google BERT checkpoint
        directory (`bert_config.json` + `bert_model.ckpt.*`) or a KerasHub preset directory.
        `overrides` replace config values (e.g. `dropout=0.0`, `return_hidden_states=True`).
        """
        from keras_bert_suite.models.from_checkpoint import load_encoder

        return load_encoder(cls, preset, load_weights=load_weights, **overrides)

    def save_preset(self, directory, vocabulary=None, lowercase=True):
        """Writes config.json, model.weights.npz and (optionally) vocab.txt to `directory`."""
        from keras_bert_suite.checkpoints import preset_dir

        preset_dir.save(directory, self.get_config(), self.weight_map(), vocabulary, lowercase)
