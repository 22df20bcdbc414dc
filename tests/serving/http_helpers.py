"""Plain HTTP (http.client) so the server is tested without our own client in the way."""

import http.client
import json
import urllib.parse


def call(url, method, path, body=None, headers=None):
    """-> (status, decoded JSON body). `body` may be bytes (sent as is) or a JSON value."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(response.read())
    finally:
        connection.close()
