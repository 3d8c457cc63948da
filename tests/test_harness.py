"""The harness itself: no test can reach the network."""
from __future__ import annotations

import socket
import urllib.request

import pytest


def test_non_loopback_connections_are_refused():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        with pytest.raises(OSError, match="network access in a test"):
            s.connect(("93.184.216.34", 80))
    with pytest.raises(OSError, match="network access in a test"):
        urllib.request.urlopen("http://example.com/", timeout=5)


def test_loopback_is_allowed():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
