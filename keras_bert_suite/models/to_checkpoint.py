"""Our models as other libraries' checkpoints.

`save_google_bert(model, directory)`: an original Google BERT checkpoint (bert_config.json,
bert_model.ckpt, vocab.txt) of a BertEncoder or a BertPretrainer (its `cls/` heads included).

`save_huggingface(model, directory)`: a Hugging Face directory. Each model goes to the `transformers` class that computes the same thing, so that
`from_pretrained` finds every weight it expects and no other:

    BertEncoder, BertFeatureExtractor   BertModel (the extractor's pooling is not a weight)
    BertPretrainer                      BertForPreTraining (MLM-only: BertForMaskedLM)
    BertClassifier                      BertForSequenceClassification (label names: id2label)
    BertTokenClassifier                 BertForTokenClassification (label names: id2label)
    BertSpanLabeler                     BertForQuestionAnswering
    BertMultipleChoice                  BertForMultipleChoice
"""

import keras
import numpy as np

from keras_bert_suite.checkpoints.bert_config import ENCODER_CONFIG_KEYS
from keras_bert_suite.checkpoints.google_bert_writer import write_google_bert
from keras_bert_suite.checkpoints.huggingface_writer import write_huggingface

# Task model -> (its transformers class, our head's Dense layer, that layer's module there).
TASK_HEADS = {
    "BertClassifier": ("BertForSequenceClassification", "classifier_head", "classifier"),
    "BertTokenClassifier": ("BertForTokenClassification", "classifier_head", "classifier"),
    "BertSpanLabeler": ("BertForQuestionAnswering", "span_head", "qa_outputs"),
    "BertMultipleChoice": ("BertForMultipleChoice", "choice_head", "classifier"),
}
ENCODER_ONLY = ("BertEncoder", "BertFeatureExtractor")


def save_huggingface(model, directory, vocabulary=None, lowercase=None):
    """Writes `model` as a Hugging Face directory (config.json, model.safetensors and, when
    the model has a preprocessor or `vocabulary` is given, the tokenizer files).

    >>> import tempfile, transformers
    >>> from keras_bert_suite import BertClassifier
    >>> classifier = BertClassifier.from_preset(
    ...     "minilm_l6_h384_uncased", num_classes=2, label_names=["negative", "positive"])
    >>> path = save_huggingface(classifier, tempfile.mkdtemp())
    >>> theirs = transformers.BertForSequenceClassification.from_pretrained(path)
    >>> theirs.config.id2label
    {0: 'negative', 1: 'positive'}

    `vocabulary` is a token list or a `BertTokenizer` (default: the preprocessor's);
    `lowercase` defaults to the tokenizer's.
    """
    name = type(model).__name__
    if name not in TASK_HEADS and name not in ENCODER_ONLY and name != "BertPretrainer":
        raise ValueError(
            f"save_huggingface takes a BertEncoder or one of our task models "
            f"({', '.join([*TASK_HEADS, *ENCODER_ONLY[1:], 'BertPretrainer'])}), got {name}.")
    config, weights = _config_and_weights(model)
    head_tensors, extra = {}, {}
    if name in TASK_HEADS:
        architecture, layer, module = TASK_HEADS[name]
        dense = getattr(model, layer)
        head_tensors = {f"{module}.weight": _numpy(dense.kernel).T,
                        f"{module}.bias": _numpy(dense.bias)}
        extra = _label_config(model)
    elif name == "BertPretrainer":
        architecture = ("BertForPreTraining" if model.next_sentence_head is not None
                        else "BertForMaskedLM")
    else:
        architecture = "BertModel"

    tokens, tokenizer_lowercase = _vocabulary(model, vocabulary, config)
    return write_huggingface(directory, config, weights, architecture, head_tensors,
                             vocabulary=tokens,
                             lowercase=tokenizer_lowercase if lowercase is None else lowercase,
                             **extra)


def save_google_bert(model, directory, vocabulary=None):
    """Writes a BertEncoder or BertPretrainer as google-research/bert released its
    checkpoints (a task model: pass `model.encoder`; the format has no task heads).

    >>> import tempfile
    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("minilm_l6_h384_uncased")
    >>> path = save_google_bert(encoder, tempfile.mkdtemp())
    >>> import numpy as np
    >>> back = BertEncoder.from_preset(path)
    >>> all(np.array_equal(a, b) for a, b in zip(back.get_weights(), encoder.get_weights()))
    True
    """
    name = type(model).__name__
    if name not in ("BertEncoder", "BertPretrainer"):
        raise ValueError(
            f"save_google_bert takes a BertEncoder or a BertPretrainer, got {name}; the "
            f"original BERT checkpoint format has no task heads (pass model.encoder to write "
            f"a task model's encoder, or use save_huggingface).")
    config, weights = _config_and_weights(model)
    tokens, _ = _vocabulary(model, vocabulary, config)
    return write_google_bert(directory, config, weights, vocabulary=tokens)


def _config_and_weights(model):
    """(BertEncoder arguments, {canonical name: float32 array}: the encoder's, and the
    pretraining heads' for a BertPretrainer)."""
    encoder = model if type(model).__name__ == "BertEncoder" else model.encoder
    config = {key: encoder.get_config()[key] for key in ENCODER_CONFIG_KEYS}
    variables = model.weight_map() if type(model).__name__ == "BertPretrainer" else (
        encoder.weight_map())
    return config, {key: _numpy(variable) for key, variable in variables.items()}


def _vocabulary(model, vocabulary, config):
    """(token list or None, lowercase) from `vocabulary` (tokens or a BertTokenizer) or the
    model's preprocessor; checks the size against the encoder."""
    tokenizer = vocabulary if vocabulary is not None else getattr(
        getattr(model, "preprocessor", None), "tokenizer", None)
    tokens = tokenizer.get_vocabulary() if hasattr(tokenizer, "get_vocabulary") else tokenizer
    if tokens is not None and len(tokens) != config["vocabulary_size"]:
        raise ValueError(f"The vocabulary has {len(tokens)} tokens but the encoder's "
                         f"vocabulary_size is {config['vocabulary_size']}.")
    return (list(tokens) if tokens is not None else None), getattr(tokenizer, "lowercase", True)


def _label_config(model):
    """id2label / label2id for the classifiers (transformers reads num_labels from them)."""
    num_classes = getattr(model, "num_classes", None)
    if num_classes is None:
        return {}
    names = model.label_names or [f"LABEL_{i}" for i in range(num_classes)]
    extra = {"id2label": {str(i): str(n) for i, n in enumerate(names)},
             "label2id": {str(n): i for i, n in enumerate(names)}}
    if type(model).__name__ == "BertClassifier":
        extra["problem_type"] = ("regression" if num_classes == 1
                                 else "single_label_classification")
    return extra


def _numpy(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)
