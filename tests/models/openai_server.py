"""A local OpenAI-compatible chat server that misbehaves on purpose (a test double, labelled as such).

Each request is answered by the next behaviour of a script (the last one repeats): a normal answer, a hang,
an HTTP error, a body that is not JSON, a `finish_reason: length` cut, a context-overflow 400. With
`reject_null_content`, like llama.cpp's server, a request holding an assistant message whose content is
null gets HTTP 500. With `alternating_roles`, like the chat templates of Mistral and Llama-2 style models
(vLLM, llama.cpp), a conversation whose turns do not alternate gets HTTP 400 (see `roles_alternate`). Every
request body is kept in `.requests`; the rejected ones are counted in `.rejected`.

It also answers `/v1/embeddings`, outside the script and `.requests`, with made-up vectors (`embedding_vector`:
words hashed into buckets), so that a command under test can be pointed at it
(`KERNELSAGE_EMBEDDINGS=openai:...`, `embeddings_env`) instead of loading the local embedding model in every
process it starts: retrieval then goes by shared words, not meaning.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0  # seconds to wait before answering (a hang, when longer than the client's timeout)


Behaviour = Callable[[dict[str, Any]], Reply]


def completion(content: str = "", *, finish_reason: str = "stop", tool_calls: list[dict] | None = None,
               prompt_tokens: int = 100) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": call["name"], "arguments": json.dumps(call.get("args", {}))}}
            for n, call in enumerate(tool_calls)
        ]
    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 10, "total_tokens": prompt_tokens + 10}}
    return Reply(body=json.dumps(body).encode())


def answer(content: str | Callable[[list[BaseMessage]], Any], **kwargs: Any) -> Behaviour:
    """A normal answer; `content` may be a function of the request's messages (as langchain messages)."""
    def reply(request: dict[str, Any]) -> Reply:
        text = content(as_messages(request)) if callable(content) else content
        text = text.content if isinstance(text, AIMessage) else text
        return completion(str(text), **kwargs)
    return reply


def tool_calls(*calls: dict[str, Any]) -> Behaviour:
    return lambda request: completion("", tool_calls=list(calls))


def hang(seconds: float = 30.0) -> Behaviour:
    return lambda request: Reply(delay=seconds, body=completion("too late").body)


def error(status: int, message: str = "server error", **extra: Any) -> Behaviour:
    body = json.dumps({"error": {"message": message, "type": "server_error", "code": status, **extra}}).encode()
    return lambda request: Reply(status=status, body=body)


def garbage() -> Behaviour:
    return lambda request: Reply(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")


def cut_off(content: str = "```cpp file=kernel.cpp\n#include \"kernelsage_cpu.h\"\nint ks_kernel(") -> Behaviour:
    return lambda request: completion(content, finish_reason="length")


def overflow() -> Behaviour:
    """What vLLM answers when the prompt does not fit."""
    return error(400, "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens "
                      "(5000 in the messages, 4000 in the completion). Please reduce the length of the messages.",
                 type="invalid_request_error")


def as_messages(request: dict[str, Any]) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "tool": ToolMessage}
    messages: list[BaseMessage] = []
    for message in request.get("messages", []):
        if message["role"] == "assistant":
            messages.append(AIMessage(content=message.get("content") or ""))
        elif message["role"] == "tool":
            messages.append(ToolMessage(content=message.get("content") or "", tool_call_id=message["tool_call_id"]))
        else:
            messages.append(kinds[message["role"]](content=message.get("content") or ""))
    return messages


EMBEDDING_DIMENSION = 384


def embedding_vector(text: str) -> list[float]:
    """The test double's embedding: the text's words hashed into EMBEDDING_DIMENSION buckets, normalised, so
    texts that share words are near. Never all zeros (a cosine distance needs a length)."""
    vector = [0.0] * EMBEDDING_DIMENSION
    for word in re.findall(r"\w+", text.lower()):
        vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
               % EMBEDDING_DIMENSION] += 1.0
    vector[0] += 1e-3
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


def embeddings_reply(request: dict[str, Any]) -> Reply:
    """An OpenAI embeddings response for the request's input (floats, or base64 as the openai client asks)."""
    texts = request.get("input", [])
    texts = [texts] if isinstance(texts, str) else texts
    as_base64 = request.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = embedding_vector(str(text))
        encoded: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode() if as_base64 else vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    body = {"object": "list", "data": data, "model": request.get("model", "test-embeddings"),
            "usage": {"prompt_tokens": 0, "total_tokens": 0}}
    return Reply(body=json.dumps(body).encode())


def embeddings_env(server_url: str) -> dict[str, str]:
    """The variables that point a command's embeddings at the test double (see the module's docstring)."""
    return {"KERNELSAGE_EMBEDDINGS": "openai:test-embeddings", "KERNELSAGE_EMBEDDINGS_BASE_URL": server_url,
            "KERNELSAGE_EMBEDDINGS_API_KEY": "sk-test"}


ALTERNATION_ERROR = "Conversation roles must alternate user/assistant/user/assistant/..."


def roles_alternate(messages: list[dict[str, Any]]) -> bool:
    """The rule of Mistral's tool-aware template (and Llama-2's, which has no tools): after an optional
    leading system message, user and assistant alternate, starting with user; tool results and assistant
    turns that call tools are left out of the check."""
    roles = [m["role"] for m in messages
             if m["role"] != "tool" and not (m["role"] == "assistant" and m.get("tool_calls"))]
    if roles[:1] == ["system"]:
        roles = roles[1:]
    return all(role == ("user" if n % 2 == 0 else "assistant") for n, role in enumerate(roles))


@dataclass
class FakeOpenAIServer:
    script: list[Behaviour]
    reject_null_content: bool = False
    alternating_roles: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            position = len(self.requests)
            self.requests.append(request)
        if self.reject_null_content and any(m.get("role") == "assistant" and m.get("content") is None
                                            for m in request.get("messages", [])):
            self.rejected += 1
            return error(500, "Assistant message must contain either 'content' or 'tool_calls'!")(request)
        if self.alternating_roles and not roles_alternate(request.get("messages", [])):
            self.rejected += 1
            return error(400, ALTERNATION_ERROR)(request)
        return self.script[min(position, len(self.script) - 1)](request)


@contextmanager
def serve(script: list[Behaviour], *, reject_null_content: bool = False,
          alternating_roles: bool = False) -> Iterator[FakeOpenAIServer]:
    """Serve `script` on a free localhost port; `.url` is the base URL (".../v1")."""
    fake = FakeOpenAIServer(script, reject_null_content=reject_null_content, alternating_roles=alternating_roles)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            reply = embeddings_reply(request) if self.path.rstrip("/").endswith("/embeddings") \
                else fake.next_reply(request)
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a hang)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
