"""Serving: a REST/gRPC client for TF Serving and `kbs serve`, the local development server.

Talks to SavedModels and HTTP/gRPC only, never to Keras models. The server side needs
tensorflow + tensorflow_text; gRPC needs tensorflow-serving-api (`pip install .[serving]`).
"""

from keras_bert_suite.serving.client import GrpcClient, RestClient
from keras_bert_suite.serving.errors import ServingError

__all__ = ["GrpcClient", "RestClient", "ServingError"]
