"""`kbs serve`'s REST API, driven with plain HTTP: TF Serving's URLs, JSON shapes and errors."""

import base64
import http.client
import json
import os
import time
import urllib.parse

import numpy as np
import pytest

from tests.serving.conftest import MAX_REQUEST_BYTES
from tests.serving.conftest import copy_version
from tests.serving.http_helpers import call


TEXTS = ["The quick brown fox jumps!", "naive cafe", "over the lazy dog."]


def expected_counts(preprocessor, texts):
    return [len(ids) for ids in preprocessor.tokenizer.encode_batch(texts)]


@pytest.mark.needs_tf_serving
def test_status_lists_versions_labels_select_one(rest_url):
    status, body = call(rest_url, "GET", "/v1/models/text_model")
    assert status == 200
    assert body == {"model_version_status": [
        {"version": v, "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        for v in ("2", "1")]}
    assert call(rest_url, "GET", "/v1/models/text_model/versions/1")[1][
        "model_version_status"][0]["version"] == "1"
    assert call(rest_url, "GET", "/v1/models/text_model/labels/canary")[1][
        "model_version_status"][0]["version"] == "2"


@pytest.mark.needs_tf_serving
def test_metadata_is_the_signature_def_map_in_tf_serving_json(rest_url):
    status, body = call(rest_url, "GET", "/v1/models/text_model/versions/1/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "text_model", "signature_name": "", "version": "1"}
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "pair", "ids"} <= set(signatures)
    default = signatures["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    assert default["inputs"]["text"]["dtype"] == "DT_STRING"
    assert default["inputs"]["text"]["tensor_shape"] == {
        "dim": [{"size": "-1", "name": ""}], "unknown_rank": False}
    assert {name: out["dtype"] for name, out in default["outputs"].items()} == {
        "num_tokens": "DT_INT32", "score": "DT_FLOAT", "first_token": "DT_STRING",
        "text_bytes": "DT_STRING"}


@pytest.mark.needs_tf_serving
def test_row_format_predicts_with_the_newest_version(rest_url, preprocessor):
    status, body = call(rest_url, "POST", "/v1/models/text_model:predict", {"instances": TEXTS})
    assert status == 200
    counts = expected_counts(preprocessor, TEXTS)
    assert counts == [7, 2, 5]
    assert body["predictions"] == [
        {"num_tokens": n, "score": n * 2 + 0.5, "first_token": first,
         "text_bytes": {"b64": base64.b64encode(text.encode()).decode()}}
        for n, first, text in zip(counts, ["the", "naive", "over"], TEXTS)]


@pytest.mark.parametrize("selector, multiplier", [
    ("/versions/1", 1), ("/versions/2", 2), ("/labels/stable", 1), ("/labels/canary", 2)])
@pytest.mark.needs_tf_serving
def test_columnar_format_and_version_selection(rest_url, preprocessor, selector, multiplier):
    status, body = call(rest_url, "POST", f"/v1/models/text_model{selector}:predict",
                        {"inputs": {"text": TEXTS}})
    assert status == 200
    counts = expected_counts(preprocessor, TEXTS)
    assert body["outputs"]["num_tokens"] == counts
    assert body["outputs"]["score"] == [n * multiplier + 0.5 for n in counts]
    # A single unnamed input is allowed in the columnar format too.
    single = call(rest_url, "POST", f"/v1/models/text_model{selector}:predict",
                  {"inputs": TEXTS})[1]
    assert single == body


@pytest.mark.needs_tf_serving
def test_named_instances_for_a_two_input_signature(rest_url, preprocessor):
    pairs = [("the fox", "lazy dog"), ("naive cafe jumps over", "a dog!")]
    status, body = call(rest_url, "POST", "/v1/models/text_model:predict", {
        "signature_name": "pair",
        "instances": [{"text_a": a, "text_b": b} for a, b in pairs]})
    assert status == 200
    expected = preprocessor(([a for a, _ in pairs], [b for _, b in pairs]))
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal([row[name] for row in body["predictions"]], expected[name])
    assert body["predictions"][0]["token_ids"] == [2, 5, 8, 3, 13, 14, 3, 0]


@pytest.mark.needs_tf_serving
def test_numeric_inputs(rest_url):
    status, body = call(rest_url, "POST", "/v1/models/text_model:predict", {
        "signature_name": "ids", "inputs": {"token_ids": [[1, 2, 3], [10, 0, 5]]}})
    assert (status, body) == (200, {"outputs": [6, 15]})


@pytest.mark.needs_tf_serving
def test_any_string_gets_an_answer_and_bytes_pass_through(rest_url):
    texts = ["", "x" * 100_000, "\x00\x07 control \x1b[31m", "emoji 🐕‍🦺 👍🏽 中国"]
    raw = [b"\xff\xfe dog caf\xc3", b"\xed\xa0\x80 surrogate bytes"]
    instances = texts + [{"b64": base64.b64encode(b).decode()} for b in raw]
    status, body = call(rest_url, "POST", "/v1/models/text_model:predict",
                        {"instances": instances})
    assert status == 200
    echoed = [base64.b64decode(row["text_bytes"]["b64"]) for row in body["predictions"]]
    assert echoed == [t.encode() for t in texts] + raw
    assert [row["num_tokens"] for row in body["predictions"]][:2] == [0, 1]  # 100k chars: [UNK]
    assert body["predictions"][4]["first_token"] == "dog"  # ill-formed bytes dropped
    # A lone surrogate escape in the JSON is passed on as its bytes, not an error.
    status, body = call(rest_url, "POST", "/v1/models/text_model:predict",
                        b'{"instances": ["\\udc80 fox"]}')
    assert status == 200 and body["predictions"][0]["first_token"] == "fox"


@pytest.mark.parametrize("method, path, body, status, message", [
    ("POST", "/v1/models/text_model:predict", b'{"instances": ["a"', 400, "JSON Parse error"),
    ("POST", "/v1/models/text_model:predict", b"\xff\xfe", 400, "not UTF-8"),
    ("POST", "/v1/models/text_model:predict", b'["a"]', 400, "JSON object"),
    ("POST", "/v1/models/text_model:predict", b'{"instances": ["a"], "inputs": ["a"]}', 400,
     "exactly one of 'instances'"),
    ("POST", "/v1/models/nope:predict", b'{"instances": ["a"]}', 404,
     "Servable not found for request: Latest(nope)"),
    ("POST", "/v1/models/text_model/versions/7:predict", b'{"instances": ["a"]}', 404,
     "Servable not found for request: Specific(text_model, 7)"),
    ("POST", "/v1/models/text_model/labels/beta:predict", b'{"instances": ["a"]}', 404,
     "Unrecognized servable version label: beta"),
    ("GET", "/v1/models/nope", None, 404, "Could not find any versions of model nope"),
    ("GET", "/v1/models/text_model/versions/7/metadata", None, 404, "Specific(text_model, 7)"),
    ("POST", "/v1/models/text_model:predict", b'{"instances": ["a"], "signature_name": "x"}',
     404, 'signature name: "x" not found'),
    ("POST", "/v1/models/text_model:predict", b'{"instances": [{"txt": "a"}]}', 400,
     "has input 'txt' that signature 'serving_default' does not take; its inputs are: text"),
    ("POST", "/v1/models/text_model:predict", b'{"inputs": {"text": ["a"], "y": ["b"]}}', 400,
     "has input 'y' that signature 'serving_default' does not take"),
    ("POST", "/v1/models/text_model:predict",
     b'{"signature_name": "pair", "instances": [{"text_a": "a"}]}', 400,
     "lacks input 'text_b'; signature 'pair' takes: text_a, text_b"),
    ("POST", "/v1/models/text_model:predict", b'{"instances": [1, 2]}', 400,
     "is a string input"),
    ("POST", "/v1/models/text_model:predict", b'{"instances": [{"b64": "@@"}]}', 400,
     "invalid base64"),
    ("POST", "/v1/models/text_model:predict",
     b'{"signature_name": "ids", "inputs": [[1, 2], [3]]}', 400, "is ragged"),
    ("POST", "/v1/models/text_model:predict",
     b'{"signature_name": "ids", "inputs": [1, 2]}', 400, "has shape [2], but the signature "
     "expects [-1, -1]"),
    ("POST", "/v1/models/text_model:predict",
     b'{"signature_name": "ids", "inputs": [["a"]]}', 400, "give JSON numbers"),
    ("POST", "/v1/models/text_model:predict",
     b'{"signature_name": "ids", "inputs": [[1, -2]]}', 400, "token_ids must be >= 0"),
    ("POST", "/v1/models/text_model:classify", b'{"examples": []}', 501, "not supported"),
    ("GET", "/v1/models/text_model:predict", None, 405, "use POST"),
    ("POST", "/v1/models/text_model/metadata", b"{}", 405, "use GET"),
    ("GET", "/v2/models/text_model", None, 404, "Malformed request"),
])
@pytest.mark.needs_tf_serving
def test_errors_are_json_with_status_codes(rest_url, method, path, body, status, message):
    got_status, got = call(rest_url, method, path, body)
    assert got_status == status, got
    assert set(got) == {"error"} and message in got["error"], got["error"]


@pytest.mark.needs_tf_serving
def test_oversized_body_is_refused_before_reading(rest_url):
    # Only the headers are sent: the server must answer from Content-Length alone. (Sending
    # the body too races with the server closing the connection: a broken pipe, not a bug.)
    parts = urllib.parse.urlsplit(rest_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.putrequest("POST", "/v1/models/text_model:predict")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(MAX_REQUEST_BYTES + 100))
        connection.endheaders()
        response = connection.getresponse()
        status, got = response.status, json.loads(response.read())
    finally:
        connection.close()
    assert status == 413
    assert f"exceeds the limit of {MAX_REQUEST_BYTES} bytes" in got["error"]
    assert call(rest_url, "GET", "/v1/models/text_model")[0] == 200  # still serving


@pytest.mark.needs_tf_serving
def test_request_without_content_length_is_refused(rest_url):
    status, got = call(rest_url, "POST", "/v1/models/text_model:predict",
                       b'14\r\n{"instances": ["a"]}\r\n0\r\n\r\n',
                       headers={"Transfer-Encoding": "chunked"})
    assert status == 411 and "Content-Length" in got["error"]


@pytest.mark.needs_tf_serving
def test_new_version_is_picked_up_and_old_one_unloaded(rest_url, model_base_path):
    # growing_model has TF Serving's default policy: the newest version only.
    assert call(rest_url, "POST", "/v1/models/growing_model:predict",
                {"instances": ["the fox"]})[1]["predictions"][0]["score"] == 2 * 1 + 0.5
    staging = model_base_path / "growing_model" / "3.partial"
    copy_version(model_base_path / "text_model" / "1", staging, 3)
    time.sleep(0.5)  # a directory that is not an integer is never loaded
    assert call(rest_url, "GET", "/v1/models/growing_model/versions/3")[0] == 404
    os.rename(staging, model_base_path / "growing_model" / "3")
    deadline = time.monotonic() + 60
    while call(rest_url, "GET", "/v1/models/growing_model")[1]["model_version_status"][0][
            "version"] != "3":
        assert time.monotonic() < deadline, "version 3 was not picked up"
        time.sleep(0.1)
    assert call(rest_url, "POST", "/v1/models/growing_model:predict",
                {"instances": ["the fox"]})[1]["predictions"][0]["score"] == 2 * 3 + 0.5
    assert call(rest_url, "GET", "/v1/models/growing_model")[1]["model_version_status"] == [
        {"version": "3", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]
    assert call(rest_url, "GET", "/v1/models/growing_model/versions/1")[0] == 404


def test_version_policies_select_like_tf_serving():
    from keras_bert_suite.serving.model_store import ModelConfig

    versions = [1, 5, 3, 10]
    assert ModelConfig("m", "/x").select(versions) == [10]
    assert ModelConfig("m", "/x", ("latest", 2)).select(versions) == [5, 10]
    assert ModelConfig("m", "/x", ("all",)).select(versions) == [1, 3, 5, 10]
    assert ModelConfig("m", "/x", ("specific", frozenset({3, 7}))).select(versions) == [3]
