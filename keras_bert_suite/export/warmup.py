"""assets.extra/tf_serving_warmup_requests: real requests TF Serving replays at load time, so
the first user request does not pay for graph initialization."""

import os

import tensorflow as tf

from keras_bert_suite.names import DEFAULT_SIGNATURE

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_RECORDS = 1000  # TF Serving reads at most this many


def write_warmup_requests(export_dir, model_name, inputs, signature_name=DEFAULT_SIGNATURE,
                          repeats=1):
    """inputs: {input name: list of example values (a batch)}. Writes `repeats` PredictLog
    records of that batch; returns the file path."""
    try:
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2
    except ImportError as error:
        raise ImportError("Writing TF Serving warmup requests needs tensorflow-serving-api "
                          "(pip install 'keras_bert_suite[serving]'), or pass "
                          "warmup=False.") from error
    if not 1 <= repeats <= MAX_RECORDS:
        raise ValueError(f"repeats must be in [1, {MAX_RECORDS}], got {repeats}.")
    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name))
    for input_name, values in inputs.items():
        request.inputs[input_name].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string))
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request))
    path = os.path.join(export_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(repeats):
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(export_dir):
    """The PredictRequests of a warmup file (for checks and tests)."""
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for record in tf.data.TFRecordDataset(os.path.join(export_dir, WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        requests.append(log.predict_log.request)
    return requests
