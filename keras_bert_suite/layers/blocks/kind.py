"""What a block kind declares: the contract between one kind of transformer block and every
transform of the library (weights by name, LoRA, pruning, model parallelism, serving).

A kind lives in its own folder (`bert/`: BERT's post-LayerNorm block) and registers one
`BlockKind` in `blocks/__init__.py`. The encoder builds its blocks with `make` and runs them
in its schedule; LoRA, pruning, int8 export, the layout map and the weight table read the
kind's declarations below and never a block's sublayers by name.

The block layer itself (`layer`) answers, besides its call (x, context, positions; the
context is what `EncoderPieces.context` computes once per pass: BERT's attention mask):
`intermediate_activations(x, context)` (the prunable neurons' activations, for pruning's
scores), `queries_keys_values(x)` and `attention_width` (MiniLM distillation's relations).

Weight templates are the kind's rows of the weight table (`checkpoints/weight_table.py`),
named `layer_{i}/<template>` in an encoder; a template's *module* is the template less its
last part when that is a variable (`attention/qkv/kernel` -> `attention/qkv`).
"""

from typing import Callable, NamedTuple, Optional

from keras_bert_suite.layers.blocks.encoder_pieces import EncoderPieces

# In `BlockKind.layout`: the mesh axis the model is split over.
MODEL_AXIS = "model"
# In `BlockKind.smoothed_inputs`: the matmul multiplies the block's own input.
BLOCK_INPUT = "block input"


class Units(NamedTuple):
    """One kind of prunable unit of a block (its attention heads, its feed-forward neurons).

    noun: how errors name them ("attention heads").
    count: block layer -> how many it has.
    config_key / default_key: the encoder arguments holding each block's count once pruned
        ("layer_num_heads") and every block's count unpruned ("num_heads").
    axes: {weight template: (axis, groups)}: the weights that carry the units; along `axis`
        they are `groups` runs of `count` equal slices each (1 for a head's columns of a
        [H, 3, N, Dh] kernel on axis 2; 2 for a GLU's [H, 2 I] input kernel, input and
        gate).
    output: the template whose axis-0 slices carry each unit's contribution to the block's
        output: zeroing them is exactly masking the unit.
    input: the template whose slices feed each unit (weights-only importance), or None.
    """

    noun: str
    count: Callable
    config_key: str
    default_key: str
    axes: dict
    output: str
    input: Optional[str] = None


class BlockKind(NamedTuple):
    """name: the encoder's `block` value ("bert").
    layer: the Keras layer class of one block.
    make: (EncoderConfig, block index, dtype policy, layer name) -> the block layer.
    weights: {template: shape symbols} (the table's symbols: "H", "N", "Dh", "I", numbers).
    modules: {module: block layer -> the Keras layer holding that module's variables}.
    lora: the modules whose kernels take LoRA adapters.
    units: {"heads": Units, "neurons": Units}: what pruning removes.
    layout: {template: axes} of a Megatron-style split, MODEL_AXIS where the model axis goes
        (the block's Keras variable paths are its templates).
    serving_form: (EncoderConfig, read, block index) -> f(x [B T, H], read, context, batch,
        length, observe) computing the block in TensorFlow ops; `read(template)` gives the
        float weights when the form is made (shapes) and the export's copies when it runs;
        `context`: the serving pieces' (`EncoderPieces.serving`; BERT's attention bias).
    precision_overrides: {template: {export precision: the precision its kernel keeps
        instead}} (e.g. a matmul whose inputs int8 cannot hold well).
    smoothed_inputs: {kernel template: the LayerNorm module (or BLOCK_INPUT) whose output it
        multiplies}: int8_vnni smooths those inputs (a LayerNorm a block lacks, see `absent`,
        passes the block's input on: it counts as BLOCK_INPUT there).
    output_norm: the LayerNorm module whose output is the block's output (what the next
        block's BLOCK_INPUT kernels multiply), or None (a pre-norm block).
    encoder: what the kind adds around its blocks (`EncoderPieces`: embeddings' form, layers
        built once, the blocks' context, what runs after the last block, the pooler, the
        kind's `block_options`); the default is BERT's.
    absent: (EncoderConfig as a dict, block index) -> the templates that block lacks (a
        first block without its attention norm), default none.
    """

    name: str
    layer: type
    make: Callable
    weights: dict
    modules: dict
    lora: tuple
    units: dict
    layout: dict
    serving_form: Callable
    precision_overrides: dict
    smoothed_inputs: dict
    output_norm: Optional[str]
    encoder: EncoderPieces = EncoderPieces()
    absent: Callable = lambda config, index: frozenset()

