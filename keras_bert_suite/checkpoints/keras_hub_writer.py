"""Writes a KerasHub preset directory that the backbone's `from_preset` loads (a row of
keras_hub_backbones.BACKBONES: BertBackbone, RobertaBackbone, XLMRobertaBackbone,
DistilBertBackbone, AlbertBackbone, ElectraBackbone; and, for a task, its TextClassifier or
BertMaskedLM).

KerasHub's own models write it: we build the backbone (and the task) with our architecture,
set every variable by its path from `keras_hub_weights.to_keras_hub`, and call their
`save_to_preset`, so the files (config.json, model.weights.h5, metadata.json, task.json,
task.weights.h5, preprocessor.json, tokenizer.json, assets/tokenizer/: vocabulary.txt,
vocabulary.json + merges.txt or vocabulary.spm) are whatever this KerasHub version writes and
reads. The tokenizer too is KerasHub's class built from ours: WordPiece from our vocabulary,
RoBERTa's, ALBERT's and XLM-R's from our BPE or SentencePiece tokenizer (its
`keras_hub_tokenizer` says which class, and where its ids differ from ours). The inverse
of `keras_hub.load` and `text.tokenizer_files.tokenizer_from_preset`.

KerasHub's BertBackbone and ElectraBackbone compute the tanh-approximate GELU where we (and
BERT's and ELECTRA's checkpoints) compute the exact one: the preset holds our weights bit for
bit, but KerasHub's outputs differ from ours by about 1e-3 relative (the numbers are in
test_export_keras_hub.py and test_keras_hub_families.py).
"""

import os

import numpy as np

from keras_bert_suite.checkpoints import keras_hub_weights
from keras_bert_suite.checkpoints.keras_hub_backbones import BACKBONES, backbone_for


def write_keras_hub(directory, config, weights, task=None, task_arguments=None,
                    task_weights=None, vocabulary=None, lowercase=True, sequence_length=None,
                    backbone_class=None, tokenizer=None):
    """Writes the directory; returns its path.

    `config`: BertEncoder arguments; `weights`: {canonical name: array} (the encoder's).
    `backbone_class`: KerasHub's backbone, a key of `keras_hub_backbones.BACKBONES` (default:
    `backbone_for(config)`).
    `task`: None (the backbone alone), the backbone's TextClassifier or masked LM, built
    with `task_arguments` (e.g. num_classes, dropout) and `task_weights` ({KerasHub
    variable path: array}, the task's own variables; the `pooled_dense` of
    RoBERTa's and DistilBERT's classifiers, our pooler, is added here). With a `vocabulary`
    (WordPiece token list: BERT, DistilBERT, ELECTRA) or a `tokenizer` (our BytePairTokenizer
    or SentencePieceTokenizer: RoBERTa, ALBERT, XLM-R) the preset also gets KerasHub's
    tokenizer, and a classifier its preprocessor with `sequence_length`; a `tokenizer` that
    is not the backbone's family's (its `keras_hub_tokenizer`) is a ValueError.
    """
    keras_hub = _import_keras_hub()
    row = backbone_for(config) if backbone_class is None else BACKBONES[backbone_class]
    # Checked before anything is written: a refused encoder leaves no directory behind.
    arguments = row.arguments(config)
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    backbone = getattr(keras_hub.models, row.class_name)(
        **arguments, dtype="float32")  # float32 whatever the policy: the preset keeps ours
    _assign(backbone.weights, keras_hub_weights.to_keras_hub(row, weights, config),
            f"KerasHub {row.class_name}")
    if vocabulary is not None:
        # Uncased BERT also strips accents (KerasHub's WordPiece tokenizers do not by default)
        tokenizer = getattr(keras_hub.models, row.tokenizer_class)(
            vocabulary=list(vocabulary), lowercase=bool(lowercase),
            strip_accents=bool(lowercase))
    elif tokenizer is not None:
        tokenizer = _subword_tokenizer(keras_hub, tokenizer, row)
    model = backbone
    if task is not None:
        model = _task(keras_hub, task, backbone, tokenizer, sequence_length, task_arguments)
        backbone_variables = {id(variable) for variable in backbone.weights}
        _assign([v for v in model.weights if id(v) not in backbone_variables],
                {**keras_hub_weights.task_pooler(row, weights), **(task_weights or {})},
                f"KerasHub {task}'s head")
    model.save_to_preset(directory)
    if tokenizer is not None and getattr(model, "preprocessor", None) is None:
        tokenizer.save_to_preset(directory)  # a task's preprocessor has written it already
    return directory


def writes_tokenizer(tokenizer, backbone):
    """Whether `tokenizer` (ours: BPE or SentencePiece) is the one KerasHub has for
    `backbone` (a row of BACKBONES; then `write_keras_hub(..., tokenizer=tokenizer)` writes
    it)."""
    if not hasattr(tokenizer, "keras_hub_tokenizer"):  # a token list
        return False
    found = tokenizer.keras_hub_tokenizer()
    return found is not None and found[0] == backbone.tokenizer_class


def _subword_tokenizer(keras_hub, tokenizer, backbone):
    """KerasHub's RobertaTokenizer / AlbertTokenizer / XLMRobertaTokenizer built from our
    BPE or SentencePiece `tokenizer`, for `backbone` (a row of BACKBONES)."""
    if not writes_tokenizer(tokenizer, backbone):
        raise ValueError(f"KerasHub's {backbone.class_name} has no tokenizer that splits text "
                         f"as this {type(tokenizer).__name__} does.")
    class_name, arguments = tokenizer.keras_hub_tokenizer()
    return getattr(keras_hub.models, class_name)(**arguments)


def _task(keras_hub, task, backbone, tokenizer, sequence_length, task_arguments):
    arguments = dict(task_arguments or {})
    if task.endswith("TextClassifier"):
        preprocessor = None
        if tokenizer is not None:
            length = {} if sequence_length is None else {"sequence_length": sequence_length}
            preprocessor = getattr(keras_hub.models, f"{task}Preprocessor")(tokenizer, **length)
        return getattr(keras_hub.models, task)(backbone, preprocessor=preprocessor, **arguments)
    if task.endswith("MaskedLM"):
        # No preprocessor: KerasHub's does the MLM masking, whose rates are not ours to pick;
        # from_preset builds its default one from tokenizer.json.
        return getattr(keras_hub.models, task)(backbone, **arguments)
    raise ValueError(f"No KerasHub task '{task}': a TextClassifier or a MaskedLM.")


def _assign(variables, values, what):
    """Sets each of `variables` to `values[variable.path]`: every variable gets exactly one
    value of its shape and no value is left over, else ValueError (a KerasHub that names its
    variables otherwise must not give a half-loaded preset)."""
    values = dict(values or {})
    paths = [variable.path for variable in variables]
    missing = sorted(set(paths) - set(values))
    unused = sorted(set(values) - set(paths))
    repeated = sorted({path for path in paths if paths.count(path) > 1})
    if missing or unused or repeated:
        raise ValueError(
            f"{what}'s variables do not match the weights to export: no value for "
            f"{missing[:5]}, values for no variable {unused[:5]}, repeated paths "
            f"{repeated[:5]} (is this the KerasHub version the writer was written for?).")
    for variable in variables:
        value = np.asarray(values[variable.path], dtype=np.float32)
        if tuple(variable.shape) != value.shape:
            raise ValueError(f"{what}: {variable.path} has shape {tuple(variable.shape)}, the "
                             f"value to export {value.shape}.")
        variable.assign(value)


def _import_keras_hub():
    try:
        import keras_hub
    except ImportError as error:
        raise ImportError("Writing a KerasHub preset needs the keras-hub package (pip install "
                          "'keras_bert_suite[keras_hub]', or keras-hub==0.32.0).") from error
    return keras_hub
