"""A STAND-IN for a language model, not a model: an OpenAI-compatible chat server that waits a fixed delay,
then answers every request with the CPU backend's shipped ReLU kernel, adopting the first memory item it was
shown. It makes a compare model-bound the way a hosted model does (a call takes seconds), so that what Ray
overlaps can be measured; what it answers says nothing about any model."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from kernelsage.parsing import AdoptionRecord, render_answer

SHOWN = re.compile(r"^- id (\d+) \(", re.MULTILINE)


def _answer(request: dict) -> str:
    prompts = [m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"]
    ids = next((ids for text in reversed(prompts) if (ids := [int(i) for i in SHOWN.findall(text)])), [])
    kernel = resources.files("kernelsage.tools.cpu").joinpath("examples", "l1_relu.cpp").read_text()
    return render_answer({"kernel.cpp": kernel}, {i: AdoptionRecord(adopted=n == 0, rationale="stand-in answer")
                                                  for n, i in enumerate(ids)})


@contextmanager
def standin_server(delay_s: float) -> Iterator[str]:
    """Serve on a free localhost port; yields the base URL (".../v1")."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            time.sleep(delay_s)
            body = json.dumps({"id": "standin", "object": "chat.completion", "created": 0, "model": "standin",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": _answer(request)}}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
