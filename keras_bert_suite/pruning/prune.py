"""`prune`: score, choose and remove in one call."""

from keras_bert_suite.models.quantization import refuse_quantized
from keras_bert_suite.pruning.calibration import calibration_arrays
from keras_bert_suite.pruning.importance import head_importance, neuron_importance
from keras_bert_suite.pruning.selection import check_fraction, least_important
from keras_bert_suite.pruning.structure import prune_units
from keras_bert_suite.pruning.units import encoder_of


def prune(task, calibration_data, head_fraction=0.0, ffn_fraction=0.0, batch_size=32,
          verbose="auto"):
    """A new, smaller task model (same class, head weights, preprocessor and label names)
    without the `head_fraction` least important attention heads and the `ffn_fraction` least
    important feed-forward neurons of the whole encoder; every layer keeps at least one of
    each.

    Heads are scored by the increase of the task's calibration loss when each is masked
    (`head_importance`), neurons by their mean activation times their output weights' norm
    on the calibration inputs (`neuron_importance`); both are ranked over all layers.

    task: one of our task models, with a compiled loss (fine-tuned, ideally: the scores
        measure what the task needs).
    calibration_data: (inputs, labels) with inputs raw text (through the task's
        preprocessor) or a dict of encoder inputs, or a tf.data.Dataset of such batches;
        a few hundred examples.
    head_fraction, ffn_fraction: shares in [0, 1) to remove.
    batch_size, verbose: of the scoring passes (`head_importance`).

    The result is a model like any other: fine-tune it (`fit`) to recover accuracy, save it
    (`.keras`, `save_to_preset`) and export it (`export_saved_model`).

    >>> from keras_bert_suite import BertClassifier
    >>> classifier = BertClassifier.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2, sequence_length=16)
    >>> texts, labels = ["a gripping drama", "a dull mess", "fine acting", "a bore"], [1, 0, 1, 0]
    >>> smaller = prune(classifier, (texts, labels), head_fraction=0.25, ffn_fraction=0.5,
    ...                 verbose=0)
    >>> sum(smaller.encoder.layer_num_heads), sum(smaller.encoder.layer_intermediate_dims)
    (3, 512)
    >>> smaller.count_params() < classifier.count_params()
    True
    """
    head_fraction = check_fraction(head_fraction, "head_fraction")
    ffn_fraction = check_fraction(ffn_fraction, "ffn_fraction")
    if encoder_of(task) is task:
        raise ValueError("prune scores heads with a task's loss: pass a task model (e.g. "
                         "BertClassifier). For an encoder, choose the units yourself and "
                         "call prune_units / prune_heads / prune_ffn.")
    refuse_quantized(task, "Pruning")  # before the scoring passes
    data = calibration_arrays(task, calibration_data, "prune")
    heads = neurons = None
    if head_fraction:
        heads = least_important(head_importance(task, data, batch_size, verbose),
                                head_fraction, "head_fraction", "head")
    if ffn_fraction:
        neurons = least_important(neuron_importance(task, data, batch_size, verbose),
                                  ffn_fraction, "ffn_fraction", "neuron")
    return prune_units(task, heads_to_remove=heads, neurons_to_remove=neurons)
