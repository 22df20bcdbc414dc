"""Checks that a SavedModel holds only ops a stock TF Serving (>= 2.12) can run.

Allowed: core TensorFlow ops (those in `tf.raw_ops`) except Python-function and XLA ops, plus
the tensorflow-text ops TF Serving links since 2.12 (its model server links tf-text's whole
`ops_lib`, which has held the SentencePiece ops since tf-text 2.3). Everything else is
reported, e.g. `PyFunc` (a `tf.py_function`), `XlaCallModule` (a JAX export) or
`TFText>RoundRobinTrim` (only TF Serving 2.20 has it).

Example (an export of `export_saved_model`; a graph with other ops raises a ValueError
that names them):
>>> check_servable_ops("saved_models/bert_classifier/1")
"""

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

SERVABLE_TF_TEXT_OPS = frozenset({
    "NormalizeUTF8", "CaseFoldUTF8", "RegexSplitWithOffsets", "WordpieceTokenizeWithOffsets",
    "FastWordpieceTokenizeWithOffsets", "FastBertNormalize",
    # tensorflow_text/core/ops/sentencepiece_ops.cc
    "SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp",
    "SentencepieceDetokenizeOp", "SentencepieceVocabSizeOp", "SentencepieceIdToStringOp",
    "SentencepieceStringToIdOp",
})
# In tf.raw_ops, yet no stock model server runs them.
NEVER_SERVABLE_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def is_servable_op(op):
    if op in SERVABLE_TF_TEXT_OPS:
        return True
    if op in NEVER_SERVABLE_OPS or op.startswith("Xla"):
        return False
    return hasattr(tf.raw_ops, op)


def saved_model_ops(export_dir):
    """{op name: sorted names of the graphs/functions using it}, over every meta graph and
    every function in its library (tf.function bodies, cond/while branches)."""
    path = os.path.join(export_dir, "saved_model.pb")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: {export_dir} is not a SavedModel "
                                "directory (expected saved_model.pb, variables/, assets/).")
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    uses = {}
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        for node in graph.node:
            uses.setdefault(node.op, set()).add("<main graph>")
        for function in graph.library.function:
            for node in function.node_def:
                uses.setdefault(node.op, set()).add(function.signature.name)
    return {op: sorted(where) for op, where in uses.items()}


def unservable_ops(export_dir):
    """{op: functions using it} for every op a stock TF Serving >= 2.12 cannot run."""
    return {op: where for op, where in saved_model_ops(export_dir).items()
            if not is_servable_op(op)}


def check_servable_ops(export_dir):
    """Raises ValueError listing the ops (and where they are) that TF Serving cannot run."""
    bad = unservable_ops(export_dir)
    if bad:
        lines = "\n".join(f"  {op}: in {', '.join(where[:3])}" for op, where in sorted(bad.items()))
        raise ValueError(
            f"The SavedModel in {export_dir} uses ops a stock TF Serving >= 2.12 cannot run:\n"
            f"{lines}\nPython functions (tf.py_function) and XLA ops (JAX exports) are never "
            "servable; export from a TensorFlow-backend process and keep text processing to "
            "core TF ops plus the tensorflow-text tokenizer ops.")
