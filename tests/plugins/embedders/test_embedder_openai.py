"""The OpenAI embedder against a tiny in-process /v1/embeddings server."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from townsquare.errors import RunStopped, UsageError
from townsquare.plugins.embedders.openai_embedder import EmbedderUnavailable, OpenAIEmbedderConfig, build_openai_embedder
from townsquare.testing.fault_server import FaultConfig, FaultServer


def raw_vector(text: str, dim: int) -> list[float]:
    """Deterministic, unnormalised: letter counts of a..(dim letters), plus one."""
    return [float(text.lower().count(chr(97 + j)) + 1) for j in range(dim)]


class FakeEmbeddingServer:
    """``POST /v1/embeddings`` on 127.0.0.1: ``raw_vector`` per input, float or base64."""

    def __init__(self, dim: int = 8, status: int = 200):
        self.dim = dim
        self.status = status
        self.requests: list[dict] = []
        self.auth: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.auth.append(self.headers.get("Authorization", ""))
                if self.path != "/v1/embeddings" or server.status != 200:
                    status = 404 if self.path != "/v1/embeddings" else server.status
                    return self._reply(status, {"error": {"message": "nope", "type": "invalid_request_error"}})
                dim = body.get("dimensions") or server.dim
                data = []
                for index, text in enumerate(body["input"]):
                    vector = raw_vector(text, dim)
                    if body.get("encoding_format") == "base64":
                        vector = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
                    data.append({"object": "embedding", "index": index, "embedding": vector})
                data.reverse()  # servers may answer out of order; "index" says which is which
                tokens = sum(len(t.split()) for t in body["input"])
                self._reply(200, {"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

            def _reply(self, status, payload):
                blob = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(blob)))
                self.end_headers()
                self.wfile.write(blob)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with FakeEmbeddingServer() as fake:
        yield fake


def expected(texts, dim):
    rows = np.asarray([raw_vector(t, dim) for t in texts], dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def build(server, monkeypatch, **config):
    monkeypatch.setenv("TS_TEST_EMBED_KEY", "sk-embed-secret")
    settings = {"base_url": server.url, "api_key_env": "TS_TEST_EMBED_KEY", "model": "fake-embed", "max_retries": 0, **config}
    return build_openai_embedder(OpenAIEmbedderConfig(**settings), types.SimpleNamespace(base_dir=".", seed=0))


def embed_then_close(embedder, *batches):
    """Embed each batch in turn on one event loop (the client's connections live on it)."""

    async def run():
        try:
            return [await embedder.embed(texts) for texts in batches]
        finally:
            await embedder.aclose()

    results = asyncio.run(run())
    return results[0] if len(results) == 1 else results


def test_batches_normalises_and_orders(server, monkeypatch, capsys):
    embedder = build(server, monkeypatch, batch_size=2)
    assert embedder.dim == 8 and len(server.requests) == 1  # the dimension was probed once
    texts = ["abba", "cab", "dead beef", "ace", "hgf"]
    vectors, more = embed_then_close(embedder, texts, ["cab", "fade"])
    assert vectors.shape == (5, 8) and vectors.dtype == np.float32
    assert np.allclose(vectors, expected(texts, 8), atol=1e-6)
    assert sorted(len(r["input"]) for r in server.requests[1:4]) == [1, 2, 2]  # 5 texts in batches of 2
    assert server.requests[-1]["input"] == ["fade"]  # "cab" came from the cache
    assert np.allclose(more, expected(["cab", "fade"], 8), atol=1e-6)
    assert all(a == "Bearer sk-embed-secret" for a in server.auth)
    assert embedder.requests == 4 and embedder.prompt_tokens == 7
    out = capsys.readouterr()
    assert "sk-embed-secret" not in out.out + out.err


def test_base64_and_dimensions(server, monkeypatch):
    embedder = build(server, monkeypatch, dim=4, send_dimensions=True, encoding_format="base64")
    assert server.requests == []  # dim given: no probe
    vectors = embed_then_close(embedder, ["abcd", "dcba a"])
    assert server.requests[0]["dimensions"] == 4 and server.requests[0]["encoding_format"] == "base64"
    assert np.allclose(vectors, expected(["abcd", "dcba a"], 4), atol=1e-6)


def test_known_models_need_no_probe_and_send_dimensions_only_when_asked(server, monkeypatch):
    embedder = build(server, monkeypatch, model="text-embedding-3-small")
    assert embedder.dim == 1536 and server.requests == []
    embedder = build(server, monkeypatch, model="text-embedding-3-small", dim=8)
    embed_then_close(embedder, ["abc"])
    assert server.requests[-1]["dimensions"] == 8
    embedder = build(server, monkeypatch, dim=8)  # another model: no "dimensions" unless send_dimensions
    embed_then_close(embedder, ["abc"])
    assert "dimensions" not in server.requests[-1]


def test_empty_texts_get_zero_rows_without_a_request(server, monkeypatch):
    embedder = build(server, monkeypatch, dim=8)
    vectors = embed_then_close(embedder, ["", "  ", "abc"])
    assert server.requests[-1]["input"] == ["abc"]
    assert not vectors[0].any() and not vectors[1].any() and np.isclose(np.linalg.norm(vectors[2]), 1.0)


def test_wrong_dimension_is_a_clean_stop(server, monkeypatch):
    embedder = build(server, monkeypatch, dim=5)  # the server answers with 8
    with pytest.raises(EmbedderUnavailable, match="8-dimensional vectors, expected 5"):
        embed_then_close(embedder, ["abc"])


def test_every_retryable_fault_is_retried_and_counted(monkeypatch):
    config = FaultConfig.every_kind(0.5, kinds=("hang", "cut", "reset", "429", "429_bare", "500", "502_html", "200_html",
                                                "body_truncated", "empty_choices"), seed=4, hang_s=3, retry_after_s=0)
    with FaultServer(config) as server:
        embedder = build(types.SimpleNamespace(url=server.base_url), monkeypatch, dim=64, max_retries=12, timeout_s=0.5,
                         batch_size=1, base_delay_s=0)
        texts = [f"text number {i}" for i in range(30)]
        vectors = embed_then_close(embedder, texts)
        served = {k.removeprefix("embeddings."): n for k, n in server.counts.items() if k.startswith("embeddings.") and k != "embeddings.ok"}
    assert vectors.shape == (30, 64) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    kinds = {"hang": "timeout", "cut": "connection", "reset": "connection", "429": "rate_limit", "429_bare": "rate_limit",
             "500": "server", "502_html": "server", "200_html": "bad_body", "body_truncated": "bad_body", "empty_choices": "empty"}
    expected_faults = {}
    for fault, n in served.items():
        expected_faults[kinds[fault]] = expected_faults.get(kinds[fault], 0) + n
    assert len(served) >= 8 and dict(embedder.faults) == expected_faults


@pytest.mark.parametrize("fault,status", [("401", 401), ("404", 404)])
def test_a_fatal_fault_stops_cleanly_naming_endpoint_and_status(monkeypatch, fault, status):
    with FaultServer(**{f"rate_{fault}": 1.0}) as server:
        embedder = build(types.SimpleNamespace(url=server.base_url), monkeypatch, dim=64, max_retries=5)
        with pytest.raises(EmbedderUnavailable) as stop:
            embed_then_close(embedder, ["abc"])
    assert isinstance(stop.value, RunStopped) and server.counts[f"embeddings.{fault}"] == 1  # not retried
    assert f"{server.base_url}/embeddings: HTTP {status}" in stop.value.reason and "\n" not in stop.value.reason


def test_unreachable_or_refused_probe_is_one_line_without_the_key(monkeypatch):
    with FakeEmbeddingServer(status=401) as refusing:
        with pytest.raises(UsageError) as info:
            build(refusing, monkeypatch)
    message = str(info.value)
    assert "AuthenticationError" in message and "set [embedder] dim" in message
    assert "sk-embed-secret" not in message and "\n" not in message


def test_key_rules(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    ctx = types.SimpleNamespace(base_dir=str(tmp_path), seed=0)
    with pytest.raises(UsageError, match="OPENAI_API_KEY is not set"):
        build_openai_embedder(OpenAIEmbedderConfig(), ctx)
    with pytest.raises(UsageError, match="OpenAI needs an API key"):
        build_openai_embedder(OpenAIEmbedderConfig(api_key_env=""), ctx)
    (tmp_path / "key.txt").write_text("sk-file\n")
    embedder = build_openai_embedder(OpenAIEmbedderConfig(api_key_file="key.txt"), ctx)
    assert embedder.client.api_key == "sk-file" and embedder.dim == 1536
    asyncio.run(embedder.aclose())


def test_registered(make_plugins):
    spec = make_plugins().registry.get("embedder", "openai")
    assert spec.plugin == "openai_embedder" and spec.config_model is OpenAIEmbedderConfig
