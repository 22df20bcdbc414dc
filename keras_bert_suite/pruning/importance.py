"""How much each attention head and feed-forward neuron matters.

Heads: the calibration loss with the head masked minus the loss without masking, measured
with the task's own compiled loss. Michel et al. 2019 ("Are Sixteen Heads Really Better than
One?") score a head by the first-order Taylor estimate of exactly this difference; measuring
it with one forward pass over the calibration set per head needs no gradients, so it is the
same code on TensorFlow, JAX and PyTorch. Masking a head is zeroing its rows of the attention
output kernel, which is exactly a head mask. A negative score means the loss went down
without the head.

Neurons: ||W_in[:, j]|| ||W_out[j, :]|| from the weights alone, or, with calibration inputs,
mean |a_j| ||W_out[j, :]|| (a_j the neuron's GELU activation over the real tokens): the
average size of what neuron j adds to the residual stream.
"""

import keras
import numpy as np
from keras import ops

from keras_bert_suite.pruning.calibration import calibration_arrays, encoder_batches
from keras_bert_suite.pruning.rebuild import without_adapters
from keras_bert_suite.pruning.units import (
    encoder_of, head_counts, neuron_counts, units_input_name, units_output_name,
    zero_units_output)

# verbose="auto" shows a progress bar from this many passes over the calibration data (a
# BERT-base has 144 heads; a tiny model's few passes take a moment).
SHOWN_FROM = 16


def head_importance(task, calibration_data, batch_size=32, verbose="auto"):
    """[scores of layer i's heads]: one NumPy array per layer ([N] each; a pruned encoder's
    layers may have different N), the increase of the calibration loss when that head alone
    is masked. Lower scores are less important.

    task: a task model with a compiled loss (our task models come compiled with one).
    calibration_data: (inputs, labels) as `keras_bert_suite.pruning.calibration` describes;
        raw text goes through the task's preprocessor once.
    verbose: 1 shows a progress bar over the heads, 0 none, "auto" one for 16 heads or more.

    The task's weights are changed while a head is scored and restored afterwards. A task
    with LoRA adapters is scored on a copy with the adapters merged (compiled with the task's
    default loss).

    >>> from keras_bert_suite import BertClassifier
    >>> classifier = BertClassifier.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2, sequence_length=16)
    >>> scores = head_importance(classifier, (["a gripping drama", "a dull mess"], [1, 0]),
    ...                          verbose=0)
    >>> [layer.shape for layer in scores]  # one score per head, per layer
    [(2,), (2,)]
    """
    encoder = encoder_of(task)
    if encoder is task or getattr(task, "loss", None) is None:
        raise ValueError(
            f"head_importance measures the calibration loss with the task's compiled loss; "
            f"{type(task).__name__} has none. Pass a task model (e.g. BertClassifier) "
            f"compiled with a loss (compile(loss=...)).")
    task = without_adapters(task)
    encoder = encoder_of(task)
    x, y, sample_weight = calibration_arrays(task, calibration_data, "head_importance")
    if y is None:
        raise ValueError("head_importance needs labels: calibration_data=(inputs, labels).")

    def loss():
        logs = task.evaluate(x, y, sample_weight=sample_weight, batch_size=batch_size,
                             verbose=0, return_dict=True)
        return float(logs["loss"])

    baseline = loss()
    counts = head_counts(encoder)
    progress = _progress(sum(counts), "head", verbose)
    variables = encoder.weight_map()
    scores = []
    for layer, count in enumerate(counts):
        kernel = variables[units_output_name(encoder, "heads", layer)]  # BERT: [N Dh, H]
        original = np.array(keras.ops.convert_to_numpy(kernel))
        layer_scores = []
        try:
            for head in range(count):
                kernel.assign(zero_units_output(original.copy(), encoder, "heads", layer,
                                                [head]))
                layer_scores.append(loss() - baseline)
                progress.add(1)
        finally:
            kernel.assign(original)
        scores.append(np.asarray(layer_scores, dtype="float64"))
    return scores


def neuron_importance(model, calibration_data=None, batch_size=32, verbose="auto"):
    """[scores of layer i's feed-forward neurons]: one NumPy array per layer ([I] each).

    Without `calibration_data`: ||W_in[:, j]|| ||W_out[j, :]|| (weights only). With it
    (inputs, with or without labels; raw text needs a task with a preprocessor):
    mean |GELU activation of j| over the real tokens times ||W_out[j, :]||. Lower scores are
    less important.

    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    >>> [layer.shape for layer in neuron_importance(encoder)]
    [(512,), (512,)]
    """
    encoder = encoder_of(model)
    blocks, variables = encoder.transformer_layers, encoder.weight_map()
    out_norms = [_unit_norms(variables, encoder, units_output_name, layer)
                 for layer in range(len(blocks))]  # [I]
    if calibration_data is None:
        return [_unit_norms(variables, encoder, units_input_name, layer) * norm
                for layer, norm in enumerate(out_norms)]
    x, _, _ = calibration_arrays(model, calibration_data, "neuron_importance")
    totals = [np.zeros(count, "float64") for count in neuron_counts(encoder)]
    tokens = 0.0
    batches = list(encoder_batches(x, batch_size))
    progress = _progress(len(batches), "batch", verbose)
    for inputs in batches:
        real = ops.cast(inputs["padding_mask"], "float32")[:, :, None]  # [B, T, 1]

        def record(index, hidden, mask):  # hidden: block `index`'s input [B, T, H]
            activations = ops.cast(blocks[index].intermediate_activations(hidden, mask),
                                   "float32")
            totals[index] += keras.ops.convert_to_numpy(
                ops.sum(ops.abs(activations) * real, axis=(0, 1)))  # [I]

        encoder.encode({name: ops.convert_to_tensor(inputs[name]) for name in inputs},
                       training=False, before_block=record)
        tokens += float(np.sum(inputs["padding_mask"]))
        progress.add(1)
    return [total / max(tokens, 1.0) * norm for total, norm in zip(totals, out_norms)]


def _progress(total, unit, verbose):
    """A progress bar over `total` passes: verbose 1 shows it, 0 not, "auto" when there are
    more than SHOWN_FROM of them."""
    show = verbose == 1 or (verbose == "auto" and total >= SHOWN_FROM)
    return keras.utils.Progbar(total, unit_name=unit, verbose=1 if show else 0)


def _unit_norms(variables, encoder, name_of, layer):
    """[I] the norm of each neuron's slice of layer `layer`'s weight `name_of` names (its
    output or input weight), over every other axis."""
    name = name_of(encoder, "neurons", layer)
    axis, _ = encoder.block_kind.units["neurons"].axes[name.split("/", 1)[1]]
    array = np.asarray(keras.ops.convert_to_numpy(variables[name]), "float64")
    return np.linalg.norm(np.moveaxis(array, axis, 0).reshape(array.shape[axis], -1), axis=1)
