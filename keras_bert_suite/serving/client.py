"""Clients for TF Serving (and `kbs serve`): REST and gRPC, with timeouts and retries.

Both retry a request the server could not take (connection refused or reset, HTTP 503, gRPC
UNAVAILABLE) `retries` times with exponential back-off (`backoff_seconds`, doubled each try),
and raise `ServingError` carrying the server's own message for anything else.

The examples assume `kbs serve --grpc_port 8500` (or TF Serving) on its default ports, serving
a `saved_models/bert_classifier/` written by `export_saved_model` (random weights here).

REST example (row format; `{"b64": ...}` is used for bytes automatically):
>>> client = RestClient(timeout=10)  # "http://127.0.0.1:8501"
>>> rows = client.predict("bert_classifier", instances=["a fine film", b"\\xff raw bytes"])
>>> len(rows), sorted(rows[0])  # one dict per instance
(2, ['label_names', 'logits', 'predicted_label', 'probabilities', 'truncated'])
>>> rows[0]["label_names"], rows[0]["predicted_label"] in ("rotten", "fresh")
(['rotten', 'fresh'], True)
>>> columns = client.predict("bert_classifier", inputs={"text": ["a fine film"]}, version=1)
>>> columns["label_names"], columns["truncated"]  # one list per output
([['rotten', 'fresh']], [False])

gRPC example (PredictionService from tensorflow-serving-api; numpy arrays back):
>>> with GrpcClient() as client:  # "127.0.0.1:8500"
...     client.predict("bert_classifier", {"text": ["a fine film"]})["probabilities"]
array([[0..., 0...]], dtype=float32)
"""

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

from keras_bert_suite.names import DEFAULT_SIGNATURE
from keras_bert_suite.serving.errors import ServingError

_RETRY_REASONS = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError)


def to_json_value(value):
    """numpy arrays, bytes and nested lists -> TF Serving's JSON (bytes as {"b64": ...})."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {key: to_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    if isinstance(value, np.generic):
        return value.item() if not isinstance(value, np.bytes_) else to_json_value(bytes(value))
    return value


def decode_b64(value):
    """Replace every {"b64": ...} object of a response by the bytes it encodes."""
    if isinstance(value, dict):
        if len(value) == 1 and "b64" in value:
            return base64.b64decode(value["b64"])
        return {key: decode_b64(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_b64(item) for item in value]
    return value


def _model_path(model, version=None, label=None):
    if version is not None and label is not None:
        raise ValueError("Give a version or a label, not both.")
    path = "/v1/models/" + urllib.parse.quote(model, safe="")
    if version is not None:
        path += f"/versions/{int(version)}"
    elif label is not None:
        path += "/labels/" + urllib.parse.quote(label, safe="")
    return path


class RestClient:
    """TF Serving's REST API (`/v1/models/...`).

    Args:
        url: the server, e.g. "http://127.0.0.1:8501".
        timeout: seconds per attempt.
        retries: extra attempts when the server is unavailable.
        backoff_seconds: wait before the first retry; doubled for each further one.
    """

    def __init__(self, url="http://127.0.0.1:8501", timeout=30.0, retries=3, backoff_seconds=0.5):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff_seconds = backoff_seconds

    def predict(self, model, instances=None, inputs=None, version=None, label=None,
                signature_name=None, decode_bytes=True):
        """`:predict`; returns the "predictions" (row format) or "outputs" (columnar)."""
        if (instances is None) == (inputs is None):
            raise ValueError("Give exactly one of instances= (row format) or inputs= (columnar).")
        body = {"instances": to_json_value(instances)} if instances is not None else {
            "inputs": to_json_value(inputs)}
        if signature_name:
            body["signature_name"] = signature_name
        answer = self.request("POST", _model_path(model, version, label) + ":predict", body)
        result = answer["predictions" if instances is not None else "outputs"]
        return decode_b64(result) if decode_bytes else result

    def status(self, model, version=None, label=None):
        """Model status: {"model_version_status": [{"version", "state", "status"}, ...]}."""
        return self.request("GET", _model_path(model, version, label))

    def metadata(self, model, version=None, label=None):
        """{"model_spec": ..., "metadata": {"signature_def": {"signature_def": {...}}}}."""
        return self.request("GET", _model_path(model, version, label) + "/metadata")

    def request(self, method, path, body=None):
        """One JSON request with retries; returns the decoded answer or raises ServingError."""
        url = self.url + path
        data = json.dumps(body).encode("utf-8") if body is not None else None
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(
                url, data=data, method=method, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                message = _error_message(error)
                if error.code != 503 or attempt == self.retries:
                    raise ServingError(error.code, message, url) from None
            except urllib.error.URLError as error:
                if isinstance(error.reason, TimeoutError):
                    raise ServingError(504, f"no answer within {self.timeout} s", url) from None
                if not isinstance(error.reason, _RETRY_REASONS) or attempt == self.retries:
                    raise ServingError(503, f"server unavailable: {error.reason}", url) from None
            except _RETRY_REASONS as error:  # the connection dropped mid-answer
                if attempt == self.retries:
                    raise ServingError(503, f"server unavailable: {error}", url) from None
            except TimeoutError:
                raise ServingError(504, f"no answer within {self.timeout} s", url) from None
            time.sleep(self.backoff_seconds * 2 ** attempt)


def _error_message(error):
    raw = error.read()
    try:
        return json.loads(raw)["error"]
    except (ValueError, KeyError, TypeError):
        return raw.decode("utf-8", "replace") or error.reason


class GrpcClient:
    """TF Serving's gRPC PredictionService (needs tensorflow-serving-api).

    Inputs are cast to the dtypes of the model's signature (read once per model, version and
    signature through GetModelMetadata), so Python ints and strings just work.

    Args:
        target: "host:port" (TF Serving's gRPC port is 8500).
        timeout: seconds per call (gRPC deadline).
        retries, backoff_seconds: as RestClient, on gRPC UNAVAILABLE.
    """

    def __init__(self, target="127.0.0.1:8500", timeout=30.0, retries=3, backoff_seconds=0.5,
                 max_message_bytes=64 * 1024 * 1024):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        self.target = target
        self.timeout = timeout
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self._grpc = grpc
        self._channel = grpc.insecure_channel(
            target, options=[("grpc.max_receive_message_length", max_message_bytes),
                             ("grpc.max_send_message_length", max_message_bytes)])
        self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._input_dtypes = {}

    def _call(self, method, request):
        for attempt in range(self.retries + 1):
            try:
                return method(request, timeout=self.timeout)
            except self._grpc.RpcError as error:
                code = error.code()
                if code != self._grpc.StatusCode.UNAVAILABLE or attempt == self.retries:
                    raise ServingError(code.name, error.details(), self.target) from None
            time.sleep(self.backoff_seconds * 2 ** attempt)

    @staticmethod
    def _spec(request, model, version, label, signature_name=None):
        if version is not None and label is not None:
            raise ValueError("Give a version or a label, not both.")
        request.model_spec.name = model
        if version is not None:
            request.model_spec.version.value = int(version)
        if label is not None:
            request.model_spec.version_label = label
        if signature_name:
            request.model_spec.signature_name = signature_name

    def metadata(self, model, version=None, label=None):
        """{signature name: SignatureDef proto} of the model version."""
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        self._spec(request, model, version, label)
        response = self._call(self._stub.GetModelMetadata, request)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return dict(signature_map.signature_def)

    def predict(self, model, inputs, version=None, label=None, signature_name=None,
                output_filter=None):
        """{input name: array-like} -> {output name: np.ndarray}."""
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        key = (model, version, label, signature_name or DEFAULT_SIGNATURE)
        if key not in self._input_dtypes:
            signature = self.metadata(model, version, label).get(key[3])
            if signature is None:
                raise ServingError("NOT_FOUND", f"model {model} has no signature {key[3]!r}",
                                   self.target)
            self._input_dtypes[key] = {name: tf.dtypes.as_dtype(info.dtype)
                                       for name, info in signature.inputs.items()}
        dtypes = self._input_dtypes[key]
        request = predict_pb2.PredictRequest()
        self._spec(request, model, version, label, signature_name)
        for name, value in inputs.items():
            dtype = dtypes.get(name)  # an unknown name goes through: the server says what's wrong
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
        if output_filter:
            request.output_filter.extend(output_filter)
        response = self._call(self._stub.Predict, request)
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}

    def status(self, model, version=None, label=None):
        """[(version, state name)] from ModelService.GetModelStatus."""
        from tensorflow_serving.apis import get_model_status_pb2
        from tensorflow_serving.apis import model_service_pb2_grpc

        request = get_model_status_pb2.GetModelStatusRequest()
        self._spec(request, model, version, label)
        stub = model_service_pb2_grpc.ModelServiceStub(self._channel)
        response = self._call(stub.GetModelStatus, request)
        states = get_model_status_pb2.ModelVersionStatus.State
        return [(s.version, states.Name(s.state)) for s in response.model_version_status]

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
