"""`kbs serve`: a local development server with TF Serving's REST API.

It answers the same URLs with the same JSON as TF Serving (`g3doc/api_rest.md`):

    GET  /v1/models/NAME[/versions/N | /labels/L]            model status
    GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signature_def, as TF Serving
    POST /v1/models/NAME[/versions/N | /labels/L]:predict    {"instances": ...} or {"inputs": ...}

Errors are `{"error": "..."}` with 400 (malformed JSON, wrong input names or shapes, a model
that refuses its input), 404 (unknown model, version, label or signature), 405, 411, 413
(body over `max_request_bytes`) or 500. New version directories are picked up by polling.
It binds 127.0.0.1 unless told otherwise and serves requests on threads.

It is a development server for machines without Docker or TF Serving (tests, demos, a
laptop): it runs the SavedModel through TensorFlow in Python, without TF Serving's request
batching, model warm-up, resource limits or hardened HTTP stack. Deploy with the
`tensorflow/serving` image (serving/compose.yaml) in production.

Example (a `saved_models/bert_classifier/` written by `export_saved_model`; port=0 picks a
free port, `kbs serve` uses TF Serving's 8501):
>>> from keras_bert_suite.serving import RestClient
>>> from keras_bert_suite.serving.model_store import ModelStore
>>> store = ModelStore(model_base_path="saved_models").start_polling()
>>> with RestServer(store, port=0) as server:
...     rows = RestClient(server.url).predict("bert_classifier", instances=["a fine film"])
>>> rows[0]["label_names"], len(rows[0]["probabilities"])
(['rotten', 'fresh'], 2)
>>> store.stop()
"""

import http.server
import json
import logging
import re
import threading
import urllib.parse

from keras_bert_suite.names import DEFAULT_SIGNATURE
from keras_bert_suite.serving import tensor_json
from keras_bert_suite.serving.errors import RequestError

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024

_MODEL_URL = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<tail>/metadata|:predict|:classify|:regress)?/?$")


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "kbs-serve"
    protocol_version = "HTTP/1.1"  # keep-alive, as TF Serving
    timeout = 60                    # seconds a client may take to send its request

    # The ThreadingHTTPServer carries the store and limits (see RestServer).
    def log_message(self, format, *args):
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status, body):
        data = json.dumps(body).encode("ascii")  # ASCII: always valid JSON
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, message):
        self._send(status, {"error": message})

    def _route(self):
        match = _MODEL_URL.match(urllib.parse.urlsplit(self.path).path)
        if not match:
            return None
        fields = match.groupdict()
        fields["name"] = urllib.parse.unquote(fields["name"])
        fields["label"] = fields["label"] and urllib.parse.unquote(fields["label"])
        fields["version"] = int(fields["version"]) if fields["version"] else None
        return fields

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def _handle(self, method):
        try:
            route = self._route()
            if route is None:
                self._discard_body()
                return self._error(404, f"Malformed request: {method} {self.path}")
            tail = route["tail"]
            wants_post = tail in (":predict", ":classify", ":regress")
            if (method == "POST") != wants_post:
                self._discard_body()
                return self._error(405, f"{method} is not allowed on {self.path}; use "
                                        f"{'POST' if wants_post else 'GET'}.")
            store = self.server.store
            if tail is None:
                return self._send(200, store.status(route["name"], route["version"],
                                                    route["label"]))
            data = self._read_body() if method == "POST" else None
            served = store.resolve(route["name"], route["version"], route["label"])
            if tail == "/metadata":
                return self._send(200, {
                    "model_spec": {"name": served.name, "signature_name": "",
                                   "version": str(served.version)},
                    "metadata": {"signature_def": served.signature_def_json()}})
            if tail != ":predict":
                return self._error(501, f"{tail[1:]} is not supported by kbs serve (a "
                                        f"development server); use :predict.")
            self._send(200, self._predict(served, self._parse_json(data)))
        except RequestError as error:
            self._error(error.status, str(error))
        except (BrokenPipeError, ConnectionResetError):
            log.info("Client left before the answer to %s %s", method, self.path)
            self.close_connection = True
        except Exception as error:  # never let one request take the server down
            log.exception("Request %s %s failed", method, self.path)
            self.close_connection = True
            self._error(500, f"{type(error).__name__}: {error}")

    def _discard_body(self):
        length = self.headers.get("Content-Length")
        if length and length.isdigit() and int(length) <= self.server.max_request_bytes:
            self.rfile.read(int(length))
        elif length:
            self.close_connection = True

    def _read_body(self):
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise RequestError("Chunked requests are not supported; send Content-Length.", 411)
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise RequestError("The request needs a Content-Length header.", 411)
        length = int(length)
        if length > self.server.max_request_bytes:
            self.close_connection = True  # the unread body must not be parsed as a request
            raise RequestError(
                f"Request body of {length} bytes exceeds the limit of "
                f"{self.server.max_request_bytes} bytes (kbs serve --max_request_bytes); "
                f"split the batch into smaller requests.", 413)
        data = self.rfile.read(length)
        if len(data) < length:
            self.close_connection = True
            raise RequestError(f"The body ended after {len(data)} of {length} bytes.")
        return data

    @staticmethod
    def _parse_json(data):
        try:
            return json.loads(data.decode("utf-8"))  # bytes would let json guess UTF-16/32
        except UnicodeDecodeError as error:
            raise RequestError(f"JSON Parse error: the body is not UTF-8 ({error}).") from None
        except json.JSONDecodeError as error:
            raise RequestError(f"JSON Parse error: {error}") from None
        except RecursionError:
            raise RequestError("JSON Parse error: the body is nested too deeply.") from None

    @staticmethod
    def _predict(served, body):
        if not isinstance(body, dict):
            raise RequestError("The request body must be a JSON object with 'instances' or "
                               "'inputs'.")
        signature_name = body.get("signature_name")
        if signature_name is not None and not isinstance(signature_name, str):
            raise RequestError("'signature_name' must be a string.")
        specs = served.input_specs(signature_name)
        inputs, row_format = tensor_json.parse_predict_request(
            body, specs, signature_name or DEFAULT_SIGNATURE)
        outputs = served.run(signature_name, inputs)
        return tensor_json.format_predict_response(outputs, row_format)


class _HttpServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's 5 refuses bursts of concurrent clients


class RestServer:
    """TF Serving's REST API over a ModelStore; a context manager that serves on a thread.

    Args:
        store: a `ModelStore`.
        host: interface to bind; 127.0.0.1 keeps the development server off the network.
        port: 8501 as TF Serving; 0 picks a free port (see `.port`, `.url`).
        max_request_bytes: larger bodies are refused with 413 before they are read.
    """

    def __init__(self, store, host="127.0.0.1", port=8501,
                 max_request_bytes=DEFAULT_MAX_REQUEST_BYTES):
        self.store = store
        self.host = host
        self.max_request_bytes = max_request_bytes
        self._httpd = _HttpServer((host, port), _Handler)
        self._httpd.store = store
        self._httpd.max_request_bytes = max_request_bytes
        self.port = self._httpd.server_address[1]
        self._thread = None

    @property
    def url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def serve_forever(self):
        self._httpd.serve_forever()

    def start(self):
        self._thread = threading.Thread(target=self.serve_forever, name="kbs-rest", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def run_server(model_base_path="saved_models", model_name=None, model_config_file=None,
               host="127.0.0.1", port=8501, grpc_port=None,
               max_request_bytes=DEFAULT_MAX_REQUEST_BYTES, poll_seconds=1.0):
    """What `kbs serve` runs: load the models, serve REST (+ gRPC when `grpc_port` is not
    None) until Ctrl-C. Port 0 takes any free port; the ports in use are printed."""
    from keras_bert_suite.serving.model_store import ModelStore

    store = ModelStore(model_base_path=model_base_path, model_name=model_name,
                       config_file=model_config_file, poll_seconds=poll_seconds).start_polling()
    rest = RestServer(store, host=host, port=port, max_request_bytes=max_request_bytes)
    grpc_server = None
    lines = [f"REST at {rest.url}/v1/models/<name>"]
    if grpc_port is not None:
        from keras_bert_suite.serving.grpc_server import start_grpc_server

        grpc_server, bound = start_grpc_server(store, host=host, port=grpc_port)
        lines.append(f"gRPC at {host}:{bound}")
    models = ", ".join(_describe(store, name) for name in store.model_names()) or "none yet"
    print(f"kbs serve (development server; use TF Serving in production): {models}\n"
          + "\n".join(lines), flush=True)
    try:
        rest.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        rest.stop()
        if grpc_server is not None:
            grpc_server.stop(grace=None)
        store.stop()


def _describe(store, name):
    rows = store.status(name)["model_version_status"]
    versions = [row["version"] for row in reversed(rows) if row["state"] == "AVAILABLE"]
    return f"{name} (versions {', '.join(versions) or 'none loaded'})"
