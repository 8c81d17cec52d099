"""A small local HTTP server that plays scripted replies and records every request.

It stands in for a vendor's API (OpenAI, Anthropic, Gemini) so the real SDKs can be tested
offline: it listens on 127.0.0.1 only, on a free port, in a daemon thread. Each request takes
the next ``Reply`` from the script; when the script has run out, it answers 418 (terminal,
never retried), so a test that makes one call too many fails loudly. The helpers below build
each vendor's response bodies, and the batch with planted secrets the provider tests share.

    with FakeServer() as server:
        server.push(Reply(429, {"error": {...}}, headers={"retry-after": "2"}), Reply(200, body))
        ... drive the SDK against server.url ...
        assert server.requests[0].json()["model"] == "gpt-x"
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from providers._retry import RetryPolicy


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict / list -> JSON; str / bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (for client timeouts)

    def payload(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, "application/json"
        if isinstance(self.body, str):
            return self.body.encode("utf-8"), "application/json"
        return json.dumps(self.body if self.body is not None else {}).encode("utf-8"), (
            "application/json"
        )


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, owner: FakeServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: tests read FakeServer.requests instead

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        owner = self.server.owner
        reply = owner._record_and_next(
            Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        if reply.delay and owner._stopped.wait(reply.delay):
            return
        data, content_type = reply.payload()
        try:
            self.send_response(reply.status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    do_POST = _handle
    do_GET = _handle


class FakeServer:
    """Scripted vendor API on 127.0.0.1. Use as a context manager."""

    def __init__(self, *replies: Reply) -> None:
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque(replies)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- script

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        return len(self._script)

    def _record_and_next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        return Reply(418, {"error": {"message": "fake server: script exhausted"}})

    # -- life cycle

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeServer:
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def bodies(self) -> list[str]:
        """Every recorded request body as text (for "the secret is in none of them")."""
        return [r.text for r in self.requests]


# ---------------------------------------------------------------- vendor bodies


def openai_chat(
    content: str | None,
    *,
    model: str = "gpt-test",
    finish_reason: str = "stop",
    refusal: str | None = None,
    prompt_tokens: int = 120,
    completion_tokens: int = 45,
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def openai_error(status: int, code: str, message: str = "error") -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "invalid_request_error"
    if status >= 500:
        kind = "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def anthropic_message(
    tool_input: dict[str, Any] | None,
    *,
    tool_name: str,
    model: str = "claude-test",
    stop_reason: str = "tool_use",
    text: str | None = None,
    input_tokens: int = 300,
    output_tokens: int = 80,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_input is not None:
        content.append(
            {"type": "tool_use", "id": "toolu_test", "name": tool_name, "input": tool_input}
        )
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cache_read_input_tokens,
        },
    }


def anthropic_error(kind: str, message: str = "error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def gemini_response(
    text: str | None,
    *,
    finish_reason: str = "STOP",
    model: str = "gemini-test",
    prompt_tokens: int = 200,
    output_tokens: int = 60,
    block_reason: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
        },
        "modelVersion": model,
    }
    if block_reason is not None:
        body["promptFeedback"] = {"blockReason": block_reason}
        return body
    candidate: dict[str, Any] = {"index": 0, "finishReason": finish_reason}
    if text is not None:
        candidate["content"] = {"role": "model", "parts": [{"text": text}]}
    body["candidates"] = [candidate]
    return body


def gemini_error(
    code: int, status: str, message: str = "error", retry_delay: str | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if retry_delay is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        ]
    return {"error": error}


# ---------------------------------------------------------------- shared test data and knobs

#: Environment variables that would leak a real key, a real endpoint or a proxy into a test.
VENDOR_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "PMEM_OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "PMEM_ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_CUSTOM_HEADERS",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "PMEM_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)

#: Planted in the test conversation; none may appear in any request body.
OPENAI_KEY = "sk-proj-Zq8vR2mK7xT4nB9wL3pH6yJ1cF5gD0sA8eU2iO7tY4rW"
PASSWORD = "hunter2hunter2"
SECRETS = (OPENAI_KEY, PASSWORD)

#: The test API key handed to the SDKs; it must never show up in a log or an error.
TEST_API_KEY = "test-key-7Hq2Lm9Xc4Vb1Nz8"


class Sleeps:
    """A fake ``sleep`` for the retry layer: records the waits, never waits."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(float(seconds))


def sample_batch() -> list[Any]:
    """One conversation (Japanese and English) with a planted API key and password."""
    turns = [
        ("user", "家計簿アプリのDBを決めたい。PostgreSQLとSQLiteで迷っている。"),
        ("assistant", "同期が要るならPostgreSQL、端末内だけならSQLiteが手軽です。"),
        (
            "user",
            f"PostgreSQLにした。複数端末で同期したいから。My key is {OPENAI_KEY} and the "
            f"db password: {PASSWORD}",
        ),
        ("assistant", "Please rotate that key; never paste keys into a chat."),
    ]
    return [conversation(turns, key="chatgpt:c1", title="家計簿アプリのDB")]


def conversation(turns: list[tuple[str, str]], *, key: str, title: str) -> Any:
    """A conversation from (role, text) turns: "user" is the person, anything else the assistant."""
    from datetime import UTC, datetime, timedelta

    from core.models import Channel, Conversation, Message, Provenance

    t0 = datetime(2024, 3, 5, 21, 10, tzinfo=UTC)
    messages = [
        Message(
            key=f"{key}:n{i}",
            node_id=f"n{i}",
            parent_id=f"n{i - 1}" if i else None,
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=t0 + timedelta(minutes=i),
            position=i,
        )
        for i, (role, text) in enumerate(turns)
    ]
    return Conversation(
        key=key,
        source=key.split(":", 1)[0],
        external_id=key.split(":", 1)[1],
        title=title,
        created_at=t0,
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


def corpus_batch() -> tuple[list[Any], list[str]]:
    """The secret-guard corpus (tests/test_secrets.py) as a batch, and the secrets it holds."""
    from tests.test_secrets import CORPUS

    turns = [("user" if i % 2 == 0 else "assistant", text) for i, (_, text, _) in enumerate(CORPUS)]
    return [conversation(turns, key="chatgpt:corpus", title="secrets")], [s for _, _, s in CORPUS]


def assert_none_in_bodies(server: FakeServer, secrets: list[str]) -> None:
    assert server.requests, "no request was recorded"
    for body in server.bodies():
        decoded = json.dumps(json.loads(body), ensure_ascii=False)
        for secret in secrets:
            assert secret not in body and secret not in decoded


def records_payload() -> dict[str, Any]:
    """A valid case-record answer (camelCase, as the model would send it)."""
    return {
        "records": [
            {
                "action": "create",
                "targetMemoryId": None,
                "expectedRevision": None,
                "title": "家計簿アプリのDBはPostgreSQL",
                "memoryKind": "decision",
                "canonicalSummary": "## 背景\n家計簿アプリのDB選定。\n## 決定\nPostgreSQLにした。",
                "indexSummary": "家計簿アプリのDBをPostgreSQLに決めた",
                "aliases": ["データベース選定", "database choice"],
                "tags": ["database"],
                "occurredAt": "2024-03-05T21:10:00Z",
                "validFrom": "2024-03-05T21:12:00Z",
                "statedFacts": ["PostgreSQLにした"],
                "inferences": [],
                "evidence": [{"messageKey": "chatgpt:c1:n2", "quoteHint": "PostgreSQLにした"}],
                "sourceConversationKeys": ["chatgpt:c1"],
            }
        ]
    }


def assert_no_secret_in(server: FakeServer) -> None:
    assert server.requests, "no request was recorded"
    for body in server.bodies():
        for secret in SECRETS:
            assert secret not in body
        # JSON escapes non-ASCII, so check the decoded text too
        decoded = json.dumps(json.loads(body), ensure_ascii=False)
        for secret in SECRETS:
            assert secret not in decoded


#: the retry policy the adapters' tests use: 3 attempts, waits recorded by ``Sleeps``
POLICY = RetryPolicy(max_attempts=3, max_wait=30.0, initial_backoff=0.5, max_backoff=4.0)
