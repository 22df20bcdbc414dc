"""GrpcClient against the local gRPC PredictionService (tensorflow-serving-api protos)."""

import numpy as np
import pytest

from keras_bert_suite.serving import GrpcClient, ServingError
from tests.serving.test_rest_client import refused_port


@pytest.fixture(scope="module")
def client(grpc_target):
    with GrpcClient(grpc_target, timeout=30) as client:
        yield client


@pytest.mark.needs_tf_serving
def test_predict_returns_numpy_outputs_by_version_and_label(client):
    texts = ["The quick brown fox jumps!", b"\xff dog"]
    newest = client.predict("text_model", {"text": texts})
    np.testing.assert_array_equal(newest["num_tokens"], [7, 1])
    np.testing.assert_array_equal(newest["score"], np.float32([14.5, 2.5]))
    assert newest["text_bytes"].tolist() == [texts[0].encode(), texts[1]]
    assert newest["first_token"].tolist() == [b"the", b"dog"]
    np.testing.assert_array_equal(client.predict("text_model", {"text": texts}, version=1)[
        "score"], [7.5, 1.5])
    np.testing.assert_array_equal(client.predict("text_model", {"text": texts}, label="stable")[
        "score"], [7.5, 1.5])
    only = client.predict("text_model", {"text": texts}, output_filter=["num_tokens"])
    assert list(only) == ["num_tokens"]


@pytest.mark.needs_tf_serving
def test_other_signatures_and_dtype_casting(client, preprocessor):
    # Python ints arrive as int64 in numpy; the client casts to the signature's int32.
    totals = client.predict("text_model", {"token_ids": np.array([[1, 2, 3], [4, 5, 6]])},
                            signature_name="ids")
    np.testing.assert_array_equal(totals["total"], [6, 15])
    packed = client.predict("text_model", {"text_a": ["the fox"], "text_b": ["lazy dog"]},
                            signature_name="pair")
    np.testing.assert_array_equal(packed["token_ids"],
                                  preprocessor((["the fox"], ["lazy dog"]))["token_ids"])


@pytest.mark.needs_tf_serving
def test_status_and_metadata(client):
    assert client.status("text_model") == [(2, "AVAILABLE"), (1, "AVAILABLE")]
    signatures = client.metadata("text_model", version=1)
    assert set(signatures["serving_default"].outputs) == {
        "num_tokens", "score", "first_token", "text_bytes"}
    assert signatures["ids"].inputs["token_ids"].dtype == 3  # DT_INT32


@pytest.mark.parametrize("kwargs, code, message", [
    (dict(model="nope", inputs={"text": ["a"]}), "NOT_FOUND", "Latest(nope)"),
    (dict(model="text_model", inputs={"text": ["a"]}, version=7), "NOT_FOUND",
     "Specific(text_model, 7)"),
    (dict(model="text_model", inputs={"txt": ["a"]}), "INVALID_ARGUMENT",
     "The request has input 'txt' that signature 'serving_default' does not take; its inputs "
     "are: text."),
    (dict(model="text_model", inputs={"token_ids": [[1, -1]]}, signature_name="ids"),
     "INVALID_ARGUMENT", "token_ids must be >= 0"),
    (dict(model="text_model", inputs={"token_ids": [1, 2]}, signature_name="ids"),
     "INVALID_ARGUMENT", "Input 'token_ids' has shape [2], but the signature expects [-1, -1]"),
])
@pytest.mark.needs_tf_serving
def test_errors_carry_status_code_and_server_message(client, kwargs, code, message):
    with pytest.raises(ServingError) as error:
        client.predict(**kwargs)
    assert error.value.status == code
    assert message in error.value.message


def test_unavailable_is_retried_then_reported():
    with refused_port() as reserved, GrpcClient(
            "127.0.0.1:%d" % reserved.getsockname()[1], timeout=5, retries=2,
            backoff_seconds=0.01) as client:
        with pytest.raises(ServingError) as error:
            client.status("text_model")
    assert error.value.status == "UNAVAILABLE"
