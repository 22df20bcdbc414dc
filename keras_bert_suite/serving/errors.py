"""Errors of the serving package: one exception type that carries the server's own message."""


class ServingError(Exception):
    """A request the server refused or could not answer.

    `status` is the HTTP status code (REST) or the gRPC status code name (e.g.
    "INVALID_ARGUMENT"); `message` is the server's own error text, unchanged, so a client
    sees exactly what TF Serving (or `kbs serve`) said.

    Example (with `kbs serve` or TF Serving answering on the default 127.0.0.1:8501):
    >>> from keras_bert_suite.serving import RestClient
    >>> try:
    ...     RestClient().predict("missing", instances=["hi"])
    ... except ServingError as error:
    ...     print(error.status, error.message)
    404 Servable not found for request: Latest(missing)
    """

    def __init__(self, status, message, url=None):
        self.status = status
        self.message = message
        self.url = url
        where = f" ({url})" if url else ""
        super().__init__(f"{status}: {message}{where}")


class RequestError(ValueError):
    """A request the server rejects before running a model; `status` is the HTTP code to send.

    Raised by `model_store` and `tensor_json` and turned into `{"error": ...}` bodies (REST) or
    gRPC status codes by the servers.
    """

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


class NotFoundError(RequestError):
    """Unknown model, version, label or signature (HTTP 404, gRPC NOT_FOUND)."""

    def __init__(self, message):
        super().__init__(message, status=404)
