"""A serving client or host does not pay for the modelling stack (docs/design.md, "Arrows":
`keras_bert_suite/serving/` talks to SavedModels and HTTP/gRPC only). Each check runs in a fresh interpreter, since this test
process has long imported Keras."""

import json
import os
import subprocess
import sys

import pytest


MODELLING_PACKAGES = ("keras_bert_suite.models", "keras_bert_suite.layers",
                      "keras_bert_suite.tasks", "keras_bert_suite.training",
                      "keras_bert_suite.text", "keras_bert_suite.export",
                      "keras_bert_suite.checkpoints")


def modules_after(statement):
    """Names in sys.modules after running `statement` in a new Python process."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return set(json.loads(result.stdout.splitlines()[-1]))


def modelling_modules(modules):
    return sorted(m for m in modules if m.startswith(MODELLING_PACKAGES))


def test_rest_client_and_server_import_neither_keras_nor_tensorflow():
    modules = modules_after(
        "import keras_bert_suite.serving\n"
        "from keras_bert_suite.serving import client, errors, server, signature_check, "
        "tensor_json")
    assert "keras" not in modules
    assert "tensorflow" not in modules
    assert modelling_modules(modules) == []


@pytest.mark.needs_tf_serving  # the SavedModel hosts (a TensorFlow subprocess)
def test_savedmodel_hosts_import_no_modelling_code():
    # TensorFlow loads the SavedModels; TF 2.20's own __init__ imports keras.src.optimizers,
    # so only our modelling packages can be checked here.
    modules = modules_after("from keras_bert_suite.serving import grpc_server, model_store")
    assert modelling_modules(modules) == []


def test_public_names_resolve_on_first_use_and_others_are_attribute_errors():
    import keras_bert_suite
    from keras_bert_suite.models.encoder import BertEncoder

    assert keras_bert_suite.BertEncoder is BertEncoder
    assert "BertTokenizer" in dir(keras_bert_suite)
    with pytest.raises(AttributeError, match="has no attribute 'BertEncodr'"):
        keras_bert_suite.BertEncodr  # noqa: B018
