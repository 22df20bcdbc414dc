"""TF Serving's gRPC PredictionService (Predict, GetModelMetadata) and ModelService
(GetModelStatus) over a ModelStore, for `kbs serve --grpc_port` (needs tensorflow-serving-api).

Like `server.py` this is a development server: same protos and status codes as TF Serving
(NOT_FOUND for unknown models/versions/signatures, INVALID_ARGUMENT for bad inputs or inputs
the model refuses), no batching.

Example (a `saved_models/bert_classifier/` written by `export_saved_model`; port=0 picks a
free port, `kbs serve --grpc_port 8500` uses TF Serving's):
>>> from keras_bert_suite.serving import GrpcClient
>>> from keras_bert_suite.serving.model_store import ModelStore
>>> grpc_server, port = start_grpc_server(ModelStore(model_base_path="saved_models"), port=0)
>>> with GrpcClient(f"127.0.0.1:{port}") as client:
...     client.predict("bert_classifier", {"text": ["a fine film"]})["label_names"]
array([[b'rotten', b'fresh']], dtype=object)
>>> _ = grpc_server.stop(grace=None)
"""

import concurrent.futures
import logging

import grpc
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from keras_bert_suite.names import DEFAULT_SIGNATURE
from keras_bert_suite.serving.errors import NotFoundError
from keras_bert_suite.serving.errors import RequestError

log = logging.getLogger(__name__)


def _abort(context, error):
    if isinstance(error, NotFoundError):
        code = grpc.StatusCode.NOT_FOUND
    elif isinstance(error, RequestError) and error.status < 500:
        code = grpc.StatusCode.INVALID_ARGUMENT
    else:
        code = grpc.StatusCode.INTERNAL
    context.abort(code, str(error))


def _resolve(store, model_spec):
    version = model_spec.version.value if model_spec.HasField("version") else None
    return store.resolve(model_spec.name, version, model_spec.version_label or None)


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, store):
        self.store = store

    def Predict(self, request, context):
        try:
            served = _resolve(self.store, request.model_spec)
            signature_name = request.model_spec.signature_name or None
            try:
                inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
            except (TypeError, ValueError) as error:
                raise RequestError(f"Malformed TensorProto: {error}") from None
            outputs = served.run(signature_name, inputs, list(request.output_filter) or None)
            response = predict_pb2.PredictResponse()
            response.model_spec.name = served.name
            response.model_spec.version.value = served.version
            response.model_spec.signature_name = signature_name or DEFAULT_SIGNATURE
            for name, value in outputs.items():
                response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
            return response
        except RequestError as error:
            _abort(context, error)
        except Exception as error:
            log.exception("gRPC Predict failed")
            _abort(context, error)

    def GetModelMetadata(self, request, context):
        try:
            if list(request.metadata_field) != ["signature_def"]:
                raise RequestError("Metadata field(s) other than signature_def are not "
                                   f"supported: {list(request.metadata_field)}")
            served = _resolve(self.store, request.model_spec)
            signature_map = get_model_metadata_pb2.SignatureDefMap()
            for name, signature_def in served.signature_defs.items():
                signature_map.signature_def[name].CopyFrom(signature_def)
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.name = served.name
            response.model_spec.version.value = served.version
            response.metadata["signature_def"].Pack(signature_map)
            return response
        except RequestError as error:
            _abort(context, error)


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, store):
        self.store = store

    def GetModelStatus(self, request, context):
        spec = request.model_spec
        try:
            status = self.store.status(
                spec.name, spec.version.value if spec.HasField("version") else None,
                spec.version_label or None)
        except RequestError as error:
            return _abort(context, error)
        response = get_model_status_pb2.GetModelStatusResponse()
        states = get_model_status_pb2.ModelVersionStatus.State
        for row in status["model_version_status"]:
            entry = response.model_version_status.add()
            entry.version = int(row["version"])
            entry.state = states.Value(row["state"])
            entry.status.error_code = 0 if row["status"]["error_code"] == "OK" else 2  # UNKNOWN
            entry.status.error_message = row["status"]["error_message"]
        return response


def start_grpc_server(store, host="127.0.0.1", port=8500, max_workers=8,
                      max_message_bytes=64 * 1024 * 1024):
    """Start the gRPC services on host:port (0 = a free port); returns (server, port)."""
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=max_workers),
        options=[("grpc.max_receive_message_length", max_message_bytes),
                 ("grpc.max_send_message_length", max_message_bytes)])
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionServicer(store), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(store), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if not bound:
        raise OSError(f"Could not bind the gRPC server to {address}.")
    server.start()
    return server, bound
