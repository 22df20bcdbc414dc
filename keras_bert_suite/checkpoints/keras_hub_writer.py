"""Writes a KerasHub preset directory that `keras_hub.models.BertBackbone.from_preset` (or
another family's backbone: RobertaBackbone, XLMRobertaBackbone, DistilBertBackbone,
AlbertBackbone, ElectraBackbone; and, for a task, `BertTextClassifier` / `BertMaskedLM` /
`<Family>TextClassifier.from_preset`) loads.

KerasHub's own models write it: we build the backbone (and the task) with our architecture,
set every variable by its path from `keras_hub.to_keras_hub` (`keras_hub_families.to_keras_hub`
for the other families), and call their `save_to_preset`, so the files (config.json,
model.weights.h5, metadata.json, task.json, task.weights.h5, preprocessor.json,
tokenizer.json, assets/tokenizer/: vocabulary.txt, vocabulary.json + merges.txt or
vocabulary.spm) are whatever this KerasHub version writes and reads. The tokenizer too is
KerasHub's class built from ours: WordPiece from our vocabulary, RoBERTa's, ALBERT's and
XLM-R's from our BPE or SentencePiece tokenizer (text/tokenizer_files.py says which class
and where its ids differ from ours). The inverse of `keras_hub.load` and
`tokenizer_files.tokenizer_from_preset`.

KerasHub's BertBackbone and ElectraBackbone compute the tanh-approximate GELU where we (and
BERT's and ELECTRA's checkpoints) compute the exact one: the preset holds our weights bit for
bit, but KerasHub's outputs differ from ours by about 1e-3 relative (the numbers are in
test_export_keras_hub.py and test_keras_hub_families.py).
"""

import os

import numpy as np

from keras_bert_suite.checkpoints import keras_hub_families
from keras_bert_suite.checkpoints.keras_hub import to_keras_hub
from keras_bert_suite.text import tokenizer_files

# KerasHub's BertBackbone hard-wires this epsilon; its config has no key for another one.
KERAS_HUB_LAYER_NORM_EPSILON = 1e-12


def write_keras_hub(directory, config, weights, task=None, task_arguments=None,
                    task_weights=None, vocabulary=None, lowercase=True, sequence_length=None,
                    backbone_class="BertBackbone", tokenizer=None):
    """Writes the directory; returns its path.

    `config`: BertEncoder arguments; `weights`: {canonical name: array} (the encoder's).
    `backbone_class`: KerasHub's backbone, "BertBackbone" or one of
    `keras_hub_families.BACKBONES` (its `backbone_for(config)`).
    `task`: None (the backbone alone), "BertTextClassifier", "BertMaskedLM" or the family's
    TextClassifier, built with `task_arguments` (e.g. num_classes, dropout) and `task_weights`
    ({KerasHub variable path: array}, the task's own variables; the `pooled_dense` of
    RoBERTa's and DistilBERT's classifiers, our pooler, is added here). With a `vocabulary`
    (WordPiece token list: BERT, DistilBERT, ELECTRA) or a `tokenizer` (our BytePairTokenizer
    or SentencePieceTokenizer: RoBERTa, ALBERT, XLM-R) the preset also gets KerasHub's
    tokenizer, and a classifier its preprocessor with `sequence_length`; a `tokenizer` that
    is not the backbone's family's (tokenizer_files.KERAS_HUB_TOKENIZERS) is a ValueError.
    """
    keras_hub = _import_keras_hub()
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    backbone, pooled = _backbone_and_pooler(config, weights, backbone_class)
    if vocabulary is not None:
        # Uncased BERT also strips accents (KerasHub's WordPiece tokenizers do not by default)
        tokenizer = getattr(keras_hub.models, backbone_class.replace("Backbone", "Tokenizer"))(
            vocabulary=list(vocabulary), lowercase=bool(lowercase),
            strip_accents=bool(lowercase))
    elif tokenizer is not None:
        tokenizer = _subword_tokenizer(keras_hub, tokenizer, backbone_class)
    model = backbone
    if task is not None:
        model = _task(keras_hub, task, backbone, tokenizer, sequence_length, task_arguments)
        backbone_variables = {id(variable) for variable in backbone.weights}
        _assign([v for v in model.weights if id(v) not in backbone_variables],
                {**pooled, **(task_weights or {})}, f"KerasHub {task}'s head")
    model.save_to_preset(directory)
    if tokenizer is not None and getattr(model, "preprocessor", None) is None:
        tokenizer.save_to_preset(directory)  # a task's preprocessor has written it already
    return directory


def _backbone_and_pooler(config, weights, backbone_class):
    """(KerasHub's backbone holding `weights`, {pooled_dense path: array} for a classifier
    where the backbone has no pooler)."""
    if backbone_class == "BertBackbone":
        return backbone_with_weights(config, weights), {}
    family = keras_hub_families.BACKBONES[backbone_class]
    backbone = getattr(_import_keras_hub().models, backbone_class)(
        **family.arguments(config), dtype="float32")  # float32: the preset keeps our weights
    variables, pooled = keras_hub_families.to_keras_hub(family, weights, config)
    _assign(backbone.weights, variables, f"KerasHub {backbone_class}")
    return backbone, pooled


def writes_tokenizer(tokenizer, backbone_class):
    """Whether `tokenizer` (ours: BPE or SentencePiece) is one KerasHub has for
    `backbone_class` (then `write_keras_hub(..., tokenizer=tokenizer)` writes it)."""
    found = tokenizer_files.keras_hub_tokenizer(tokenizer)
    return found is not None and found[0].replace("Tokenizer", "Backbone") == backbone_class


def _subword_tokenizer(keras_hub, tokenizer, backbone_class):
    """KerasHub's RobertaTokenizer / AlbertTokenizer / XLMRobertaTokenizer built from our
    BPE or SentencePiece `tokenizer`, for `backbone_class`."""
    if not writes_tokenizer(tokenizer, backbone_class):
        raise ValueError(f"KerasHub's {backbone_class} has no tokenizer that splits text as "
                         f"this {type(tokenizer).__name__} does.")
    class_name, arguments = tokenizer_files.keras_hub_tokenizer(tokenizer)
    return getattr(keras_hub.models, class_name)(**arguments)


def backbone_with_weights(config, weights):
    """KerasHub's BertBackbone with `config`'s architecture (float32) holding `weights`."""
    keras_hub = _import_keras_hub()
    _check_config(config)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocabulary_size"], num_layers=config["num_layers"],
        num_heads=config["num_heads"], hidden_dim=config["hidden_dim"],
        intermediate_dim=config["intermediate_dim"], dropout=config["dropout"],
        max_sequence_length=config["max_sequence_length"], num_segments=config["num_segments"],
        # float32 whatever the global policy: the preset keeps our weights exactly
        dtype="float32")
    _assign(backbone.weights, to_keras_hub(weights, config), "KerasHub BertBackbone")
    return backbone


def _task(keras_hub, task, backbone, tokenizer, sequence_length, task_arguments):
    arguments = dict(task_arguments or {})
    if task.endswith("TextClassifier"):
        preprocessor = None
        if tokenizer is not None:
            length = {} if sequence_length is None else {"sequence_length": sequence_length}
            preprocessor = getattr(keras_hub.models, f"{task}Preprocessor")(tokenizer, **length)
        return getattr(keras_hub.models, task)(backbone, preprocessor=preprocessor, **arguments)
    if task == "BertMaskedLM":
        # No preprocessor: KerasHub's does the MLM masking, whose rates are not ours to pick;
        # from_preset builds its default one from tokenizer.json.
        return keras_hub.models.BertMaskedLM(backbone, **arguments)
    raise ValueError(f"No KerasHub task '{task}': a TextClassifier or BertMaskedLM.")


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


def _check_config(config):
    epsilon = config["layer_norm_epsilon"]
    if not np.isclose(epsilon, KERAS_HUB_LAYER_NORM_EPSILON, rtol=1e-6):
        raise ValueError(
            f"layer_norm_epsilon is {epsilon}, but KerasHub's BertBackbone hard-wires "
            f"{KERAS_HUB_LAYER_NORM_EPSILON} and its config cannot say otherwise: the preset "
            f"would compute other numbers. Export to Hugging Face instead (save_huggingface).")


def _import_keras_hub():
    try:
        import keras_hub
    except ImportError as error:
        raise ImportError("Writing a KerasHub preset needs the keras-hub package (pip install "
                          "'keras_bert_suite[keras_hub]', or keras-hub==0.32.0).") from error
    return keras_hub
