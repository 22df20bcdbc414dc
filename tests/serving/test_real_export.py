"""A real `export_saved_model` BERT export served by `kbs serve`'s REST and gRPC servers."""

import os

import pytest
import tensorflow as tf

from keras_bert_suite.serving import GrpcClient, RestClient
from keras_bert_suite.serving.grpc_server import start_grpc_server
from keras_bert_suite.serving.model_store import ModelStore
from keras_bert_suite.serving.server import RestServer
from tests.numerics import assert_close

pytestmark = [pytest.mark.needs_savedmodel, pytest.mark.needs_tf_serving, pytest.mark.slow]

TEXTS = ["A gorgeous, witty film.", "Tedious and overlong; I left early!", ""]


def test_exported_encoder_answers_like_the_keras_model(tmp_path):
    from keras_bert_suite import BertEncoder, BertPreprocessor
    from keras_bert_suite.export.saved_model import export_saved_model

    encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=16)
    path = export_saved_model(encoder, str(tmp_path), name="encoder", preprocessor=preprocessor)
    expected = encoder.predict_on_batch(preprocessor(TEXTS))["pooled_output"]

    store = ModelStore(model_base_path=str(tmp_path), poll_seconds=0)
    grpc_server, port = start_grpc_server(store, port=0)
    try:
        with RestServer(store, port=0) as server:
            rows = RestClient(server.url).predict("encoder", instances=TEXTS)
        # Served graph vs eager Keras: other oneDNN kernels, so a relative 1e-4 (as in
        # tests/export/test_task_exports.py).
        assert_close([row["pooled_output"] for row in rows], expected, rtol=1e-4, atol=1e-5)
        with GrpcClient(f"127.0.0.1:{port}") as client:
            outputs = client.predict("encoder", {"text": TEXTS})
            assert_close(outputs["pooled_output"], expected, rtol=1e-4, atol=1e-5)
            # The export's warm-up records are valid PredictionService requests.
            from tensorflow_serving.apis import prediction_log_pb2

            records = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
            replayed = 0
            for record in tf.data.TFRecordDataset(records):
                log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
                response = client._stub.Predict(log.predict_log.request, timeout=30)
                assert response.model_spec.version.value == 1
                replayed += 1
            assert replayed >= 1
    finally:
        grpc_server.stop(grace=None)
