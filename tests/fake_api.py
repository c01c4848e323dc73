"""A Kubernetes API server stand-in for the programs our pods run against the API (the burn-in's node
patch, the sweeper, the gang watchdog, the step gates): HTTPS on 127.0.0.1 with a certificate for
that address, reached the way the kubelet tells a container (KUBERNETES_SERVICE_HOST and _PORT), with
the service account's token and ca.crt. Needs openssl on PATH for the certificate."""

from __future__ import annotations

import functools
import json
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

TOKEN = "service-account-token"


@functools.cache
def certificate() -> tuple[Path, Path]:
    """A self-signed certificate and key for 127.0.0.1, made once per test process."""
    if shutil.which("openssl") is None:
        pytest.fail(
            "the tests that run our pods' API clients need openssl to make a certificate for a local API "
            "server: install it (Debian/Ubuntu: apt-get install openssl; macOS: brew install openssl)"
        )
    directory = Path(tempfile.mkdtemp(prefix="fake-api-"))
    cert, key = directory / "api.crt", directory / "api.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class FakeApi:
    """Answers by (method, path prefix), the longest prefix first: a JSON value, or a list of them
    answered in turn (the last repeats); an int is answered as that HTTP status. Anything else: an
    empty list. Every request is kept (method, path, Authorization header, body)."""

    def __init__(self, answers: dict[tuple[str, str], Any] | None = None) -> None:
        self.cert, self.key = certificate()
        self.answers: dict[tuple[str, str], Any] = dict(answers or {})
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                api.requests.append(
                    {"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                state = api.next_state(self.command, self.path)
                code = state if isinstance(state, int) else 200
                data = json.dumps({"kind": "Status", "code": state} if isinstance(state, int) else state).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_POST = answer  # noqa: N815 (http.server's names)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        # shutdown() waits for serve_forever's next poll: 20 ms instead of its default half second.
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def next_state(self, method: str, path: str) -> Any:
        found = sorted((p for m, p in self.answers if m == method and path.startswith(p)), key=len, reverse=True)
        if not found:
            return {"items": []}
        state = self.answers[(method, found[0])]
        if isinstance(state, list):
            return state.pop(0) if len(state) > 1 else state[0]
        return state

    def env(self) -> dict[str, str]:
        """What the kubelet gives every container about the API server."""
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port)}

    def write_account(self, directory: Path, namespace: str = "default") -> None:
        """The service account's files as the kubelet mounts them."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "token").write_text(TOKEN)  # a projected token file ends without a newline
        (directory / "ca.crt").write_text(self.cert.read_text())
        (directory / "namespace").write_text(namespace)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], seconds: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for request in list(self.requests):
                if predicate(request):
                    return request
            time.sleep(0.02)
        raise AssertionError(f"no such request within {seconds} s; seen: {[r['path'] for r in self.requests]}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
