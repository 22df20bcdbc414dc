"""A small real SavedModel in TF Serving's layout, and one server (REST + gRPC) per session.

The model is written with TF directly (no Keras model): our BertTokenizer/BertPreprocessor
graph on a small vocabulary (tf-text ops, so the server must import tensorflow_text), with
three signatures:
* serving_default(text)            -> num_tokens, score = num_tokens * version + 0.5,
                                      first_token (a string), text_bytes (the input echoed)
* pair(text_a, text_b)              -> token_ids, segment_ids, padding_mask [B, 8]
* ids(token_ids int32 [B, T])       -> total (row sums); refuses negative ids (a model error)
Each version multiplies by its own number (read from its assets/version.txt), so the answer
says which version ran; later versions are copies of version 1 with that asset rewritten
(saving takes ~7 s, copying a few ms).
"""

import os
import shutil
import textwrap

import pytest
import tensorflow as tf

from keras_bert_suite.serving.grpc_server import start_grpc_server
from keras_bert_suite.serving.model_store import ModelStore
from keras_bert_suite.serving.server import RestServer
from keras_bert_suite.text import BertPreprocessor
from keras_bert_suite.text import BertTokenizer
from tests.text.conftest import SMALL_VOCABULARY

SEQUENCE_LENGTH = 8
MAX_REQUEST_BYTES = 1024 * 1024


def make_preprocessor():
    return BertPreprocessor(BertTokenizer(SMALL_VOCABULARY), sequence_length=SEQUENCE_LENGTH)


def write_text_model(path):
    """Version 1 of the test model; `copy_version` makes the others."""
    asset_source = path.parent / "version.txt"
    asset_source.parent.mkdir(parents=True, exist_ok=True)
    asset_source.write_text("1")
    preprocessor = make_preprocessor()
    tokenizer = preprocessor.tokenizer
    vocabulary = tf.constant(SMALL_VOCABULARY + [""])  # "" stands for "no token"
    module = tf.Module()
    module.preprocessor = preprocessor
    module.version_file = tf.saved_model.Asset(str(asset_source))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        ids = tokenizer(text)
        num_tokens = tf.cast(ids.row_lengths(), tf.int32)
        version_number = tf.strings.to_number(tf.io.read_file(module.version_file))
        first = ids.to_tensor(default_value=len(SMALL_VOCABULARY), shape=[None, 1])[:, 0]
        return {"num_tokens": num_tokens,
                "score": tf.cast(num_tokens, tf.float32) * version_number + 0.5,
                "first_token": tf.gather(vocabulary, first),
                "text_bytes": tf.identity(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def pair(text_a, text_b):
        return preprocessor((text_a, text_b))

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")])
    def ids(token_ids):
        check = tf.debugging.assert_non_negative(token_ids, message="token_ids must be >= 0")
        with tf.control_dependencies([check]):
            return {"total": tf.reduce_sum(token_ids, axis=1)}

    module.serve, module.pair, module.ids = serve, pair, ids
    tf.saved_model.save(module, str(path),
                        signatures={"serving_default": serve, "pair": pair, "ids": ids})
    asset_source.unlink()


def copy_version(source, target, version_number):
    """A copy of a version directory whose score multiplier is `version_number`."""
    shutil.copytree(source, target)
    (target / "assets" / "version.txt").write_text(str(version_number))


def publish(source, target):
    """Copy a version directory into place atomically, as an exporter must."""
    staging = f"{target}.partial"
    shutil.copytree(source, staging)
    os.rename(staging, target)


@pytest.fixture(scope="session")
def model_base_path(tmp_path_factory):
    """A saved_models/-like root: text_model/{1,2}, growing_model/1."""
    root = tmp_path_factory.mktemp("serving")
    base = root / "saved_models"
    write_text_model(base / "text_model" / "1")
    copy_version(base / "text_model" / "1", base / "text_model" / "2", 2)
    (base / "growing_model").mkdir()
    publish(base / "text_model" / "1", base / "growing_model" / "1")
    (base / "README.md").write_text("saved_models/ has a README; it is not a model.\n")
    return base


@pytest.fixture(scope="session")
def models_config(model_base_path):
    path = model_base_path.parent / "models.config"
    path.write_text(textwrap.dedent(f"""\
        model_config_list {{
          config {{
            name: "text_model"
            base_path: "{model_base_path / 'text_model'}"
            model_platform: "tensorflow"
            model_version_policy {{ all {{}} }}
            version_labels {{ key: "stable" value: 1 }}
            version_labels {{ key: "canary" value: 2 }}
          }}
          config {{
            name: "growing_model"
            base_path: "{model_base_path / 'growing_model'}"
            model_platform: "tensorflow"
          }}
        }}
        """))
    return str(path)


@pytest.fixture(scope="session")
def store(models_config):
    store = ModelStore(config_file=models_config, poll_seconds=0.2).start_polling()
    yield store
    store.stop()


@pytest.fixture(scope="session")
def rest_url(store):
    with RestServer(store, port=0, max_request_bytes=MAX_REQUEST_BYTES) as server:
        yield server.url


@pytest.fixture(scope="session")
def grpc_target(store):
    server, port = start_grpc_server(store, port=0)
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture(scope="session")
def preprocessor():
    return make_preprocessor()
