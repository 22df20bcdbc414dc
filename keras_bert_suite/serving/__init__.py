"""Serving: a REST/gRPC client for TF Serving and `kbs serve`, the local development server.

Talks to SavedModels and HTTP/gRPC only, never to Keras models, and imports neither Keras nor
the modelling packages (tests/serving/test_imports.py): the REST client and the HTTP layer need
numpy only. The gRPC client, `model_store` (which loads SavedModels) and `grpc_server` import
tensorflow (+ tensorflow_text on the server; gRPC needs tensorflow-serving-api,
`pip install .[serving]`), and TensorFlow 2.20 itself imports part of Keras on import.
"""

from keras_bert_suite.serving.client import GrpcClient, RestClient
from keras_bert_suite.serving.errors import ServingError

__all__ = ["GrpcClient", "RestClient", "ServingError"]
