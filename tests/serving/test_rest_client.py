"""RestClient against the local server: both formats, bytes, server messages, retries."""

import contextlib
import http.server
import socket
import threading

import numpy as np
import pytest

from keras_bert_suite.serving import RestClient, ServingError
from keras_bert_suite.serving.server import RestServer


TEXTS = ["The quick brown fox jumps!", "naive cafe"]


@contextlib.contextmanager
def refused_port():
    """A port the OS gave us, bound but not listening while the block runs: connections to
    it are refused, and no other process can take it meanwhile (no free-port race)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s


@pytest.mark.needs_tf_serving
def test_row_and_columnar_predict_with_bytes_both_ways(rest_url):
    client = RestClient(rest_url, timeout=30)
    rows = client.predict("text_model", instances=TEXTS + [b"\xff dog"])
    assert [row["num_tokens"] for row in rows] == [7, 2, 1]
    assert [row["text_bytes"] for row in rows] == [t.encode() for t in TEXTS] + [b"\xff dog"]
    columns = client.predict("text_model", inputs={"text": np.array(TEXTS)}, version=1)
    assert columns["score"] == [7.5, 2.5]
    assert columns["first_token"] == ["the", "naive"]
    ids = client.predict("text_model", inputs=np.array([[1, 2], [3, 4]], np.int32),
                         signature_name="ids", label="canary")
    assert ids == [3, 7]


@pytest.mark.needs_tf_serving
def test_status_and_metadata(rest_url):
    client = RestClient(rest_url)
    assert [row["version"] for row in client.status("text_model")["model_version_status"]] == [
        "2", "1"]
    metadata = client.metadata("text_model", label="stable")
    assert metadata["model_spec"]["version"] == "1"
    assert "pair" in metadata["metadata"]["signature_def"]["signature_def"]


@pytest.mark.needs_tf_serving
def test_errors_carry_the_servers_message(rest_url):
    client = RestClient(rest_url)
    with pytest.raises(ServingError) as error:
        client.predict("text_model", instances=[{"txt": "a"}])
    assert error.value.status == 400
    assert error.value.message == ("Element 0 of 'instances' has input 'txt' that signature "
                                   "'serving_default' does not take; its inputs are: text.")
    with pytest.raises(ServingError) as error:
        client.status("text_model", version=9)
    assert (error.value.status, error.value.message) == (
        404, "Servable not found for request: Specific(text_model, 9)")
    with pytest.raises(ValueError, match="exactly one of instances"):
        client.predict("text_model")


@pytest.mark.needs_tf_serving
def test_concurrent_requests_get_their_own_answers(rest_url):
    client = RestClient(rest_url)
    texts = [" ".join(["fox"] * n) for n in range(1, 33)]
    results = [None] * len(texts)

    def ask(i):
        try:
            results[i] = client.predict("text_model", instances=[texts[i]], version=1)[0]
        except Exception as error:  # reported below, with the text that failed
            results[i] = {"error": repr(error)}

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.get("num_tokens", r) for r in results] == list(range(1, 33))
    assert [r["score"] for r in results] == [n + 0.5 for n in range(1, 33)]


@pytest.mark.needs_tf_serving
def test_retries_until_a_late_server_comes_up(store):
    reserved = socket.socket()  # bound, not listening: connections are refused
    reserved.bind(("127.0.0.1", 0))
    port = reserved.getsockname()[1]
    servers = []

    def come_up():
        reserved.close()  # hand the port to the server
        servers.append(RestServer(store, port=port).start())

    late = threading.Timer(0.5, come_up)
    late.start()
    try:
        client = RestClient(f"http://127.0.0.1:{port}", retries=6, backoff_seconds=0.2)
        assert client.predict("text_model", instances=["the fox"], version=2) == [
            {"num_tokens": 2, "score": 4.5, "first_token": "the", "text_bytes": b"the fox"}]
    finally:
        late.join()
        for server in servers:
            server.stop()


def test_gives_up_on_an_unreachable_server_with_a_clear_error():
    with refused_port() as reserved:
        client = RestClient("http://127.0.0.1:%d" % reserved.getsockname()[1], retries=2,
                            backoff_seconds=0.01)
        with pytest.raises(ServingError, match="server unavailable") as error:
            client.status("text_model")
    assert error.value.status == 503


class _FlakyHandler(http.server.BaseHTTPRequestHandler):
    """Answers 503 to the first two requests (a TF Serving still loading), then 200."""

    calls = 0

    def do_GET(self):
        type(self).calls += 1
        status, body = (503, b'{"error": "loading"}') if self.calls <= 2 else (200, b'{"ok": 1}')
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_url():
    _FlakyHandler.calls = 0
    server = http.server.HTTPServer(("127.0.0.1", 0), _FlakyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_retries_503_then_succeeds(flaky_url):
    assert RestClient(flaky_url, retries=3, backoff_seconds=0.01).status("m") == {"ok": 1}
    assert _FlakyHandler.calls == 3


def test_503_after_the_last_retry_raises_the_servers_message(flaky_url):
    with pytest.raises(ServingError) as error:
        RestClient(flaky_url, retries=1, backoff_seconds=0.01).status("m")
    assert (error.value.status, error.value.message, _FlakyHandler.calls) == (503, "loading", 2)


def test_timeout_is_reported():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        client = RestClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3)
        with pytest.raises(ServingError, match="no answer within 0.3 s") as error:
            client.status("m")
        assert error.value.status == 504
    finally:
        silent.close()
