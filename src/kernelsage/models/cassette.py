"""Record any chat model's calls to a JSONL cassette, and replay a cassette deterministically.

A cassette line is one exchange: `{"key", "tools", "request", "response"}`. The key is the sha256 of a
canonical JSON of the request: each input message's role, content, tool_calls (name, args, id) and
tool_call_id, plus the OpenAI-format schemas of the bound tools and the tool_choice, if any. Recorder
and replayer compute it with the same function, so a replay serves exactly what was recorded and a
request it does not hold fails loudly instead of guessing.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import threading
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableBinding
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

from kernelsage.errors import CassetteMissError, ModelError
from kernelsage.models.factory import model_name

CASSETTE_VERSION = 1
# Response metadata worth keeping: enough to audit a replay, nothing provider-specific or secret.
_KEPT_RESPONSE_METADATA = ("model_name", "model_provider", "finish_reason", "system_fingerprint")


def tool_schemas(tools: Sequence[Any], tool_choice: Any = None) -> list[dict[str, Any]]:
    """The bound tools as OpenAI-format schemas (what enters the request key), tool_choice last if set."""
    schemas = [convert_to_openai_tool(tool) for tool in tools]
    if tool_choice is not None:
        schemas.append({"tool_choice": tool_choice})
    return schemas


def canonical_request(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The parts of a request that decide the answer, in a JSON-ready form."""
    return {
        "messages": [_canonical_message(message) for message in messages],
        "tools": list(tools),
    }


def request_key(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()) -> str:
    """sha256 of the canonical request; equal for equal prompts and tool schemas, whatever the model."""
    return _sha256(canonical_request(messages, tools))


# Numbers in a prompt (latencies, errors, relevance scores, counts that depend on random inputs, item ids)
# differ between a recording and its replay on another machine or run; the answer is chosen by the text.
# So the key sees every number ("1,024" included: counts are printed with separators) as one token, and
# the memory listing ("- id ..." lines) as a set.
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])[-+]?\d+(?:,\d{3}(?!\d))*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _canonical_text(text: str) -> str:
    """Numbers as one token; each run of memory entries ("- id ..." with its indented lines) sorted."""
    out: list[str] = []
    run: list[list[str]] = []
    for line in [*_NUMBER.sub("<num>", text).split("\n"), None]:
        if line is not None and line.startswith("- id "):
            run.append([line])
        elif line is not None and run and line.startswith("  "):
            run[-1].append(line)
        else:
            out += [entry_line for entry in sorted(run) for entry_line in entry]
            run = []
            if line is not None:
                out.append(line)
    return "\n".join(out)


def _without_measurements(content: Any) -> Any:
    if isinstance(content, str):
        return _canonical_text(content)
    if isinstance(content, list):
        return [_without_measurements(part) for part in content]
    if isinstance(content, dict):
        return {key: _without_measurements(value) for key, value in content.items()}
    return content


def _canonical_message(message: BaseMessage) -> dict[str, Any]:
    canonical: dict[str, Any] = {"role": message.type, "content": _without_measurements(message.content)}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        canonical["tool_calls"] = [
            {"name": call["name"], "args": call["args"], "id": call.get("id")} for call in tool_calls
        ]
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id:
        canonical["tool_call_id"] = tool_call_id
    return canonical


def _sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def response_to_dict(message: AIMessage) -> dict[str, Any]:
    """An answer in the cassette's canonical form."""
    metadata = {k: v for k, v in message.response_metadata.items() if k in _KEPT_RESPONSE_METADATA}
    return {
        "content": message.content,
        "tool_calls": [
            {"name": call["name"], "args": call["args"], "id": call.get("id")} for call in message.tool_calls
        ],
        "invalid_tool_calls": [dict(call) for call in message.invalid_tool_calls],
        "usage_metadata": dict(message.usage_metadata) if message.usage_metadata else None,
        "response_metadata": metadata,
        "id": message.id,
    }


def response_from_dict(data: dict[str, Any]) -> AIMessage:
    """The inverse of `response_to_dict`."""
    return AIMessage(
        content=data["content"],
        tool_calls=data.get("tool_calls") or [],
        invalid_tool_calls=data.get("invalid_tool_calls") or [],
        usage_metadata=data.get("usage_metadata"),
        response_metadata=data.get("response_metadata") or {},
        id=data.get("id"),
    )


class _CassetteModel(BaseChatModel):
    """What the recorder and the replayer share: a kind that names them in traces."""

    llm_kind: ClassVar[str]

    @property
    def _llm_type(self) -> str:
        return self.llm_kind


class RecordingChatModel(_CassetteModel):
    """Forwards every call to `inner` and appends the exchange to the JSONL cassette at `path`.

    The recorder's run is the one run traced: it calls the inner model's `_generate` / `_agenerate`
    with its own run manager (streamed tokens arrive there) and reports the inner model in its tracing
    parameters, so a recorded call is traced once, under the real model's name. The inner model's own
    cache and rate limiter are bypassed while recording. `bind_tools` binds the tools on `inner` and
    returns a recorder whose key includes their schemas, so tool-calling requests record like any other.
    """

    inner: BaseChatModel
    path: Path
    tools: list[dict[str, Any]] = Field(default_factory=list)
    bound_kwargs: dict[str, Any] = Field(default_factory=dict)  # what inner.bind_tools bound (tools=...)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, inner: BaseChatModel, path: Path | str, **kwargs: Any) -> None:
        super().__init__(inner=inner, path=Path(path), **kwargs)

    llm_kind: ClassVar[str] = "recording"

    @property
    def display_name(self) -> str:
        return f"record:{model_name(self.inner)}"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any):
        return self.inner._get_ls_params(stop=stop, **kwargs)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> RecordingChatModel:
        if self.tools:
            raise ModelError(
                "tools are already bound to this recording model: bind them once, on the base model"
            )
        extra = {"tool_choice": tool_choice} if tool_choice is not None else {}
        bound = self.inner.bind_tools(tools, **extra, **kwargs)
        if isinstance(bound, RunnableBinding) and isinstance(bound.bound, BaseChatModel):
            inner, bound_kwargs = bound.bound, dict(bound.kwargs)
        elif isinstance(bound, BaseChatModel):
            inner, bound_kwargs = bound, {}
        else:
            raise ModelError(
                f"cannot record {type(bound).__name__} returned by bind_tools: wrap a chat model"
            )
        recorder = RecordingChatModel(
            inner, self.path, tools=tool_schemas(tools, tool_choice), bound_kwargs=bound_kwargs
        )
        recorder._lock = self._lock  # one file, one writer lock
        return recorder

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        result = self.inner._generate(messages, stop, run_manager, **{**self.bound_kwargs, **kwargs})
        self._record(messages, result)
        return result

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        result = await self.inner._agenerate(messages, stop, run_manager, **{**self.bound_kwargs, **kwargs})
        self._record(messages, result)
        return result

    def _record(self, messages: list[BaseMessage], result: ChatResult) -> None:
        answer = result.generations[0].message
        if not isinstance(answer, AIMessage):
            raise ModelError(f"the recorded model returned a {type(answer).__name__}, not an AIMessage")
        request = canonical_request(messages, self.tools)
        line = {
            "version": CASSETTE_VERSION,
            "key": _sha256(request),
            "request": request,
            "response": response_to_dict(answer),
        }
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as cassette:
                cassette.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")


class _Cassette:
    """The recorded answers by key, with a cursor per key; shared by a replayer and its tool-bound copies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []  # beside `requests`, in recorded order
        self.served: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        for number, line in enumerate(_read_lines(path), start=1):
            try:
                exchange = json.loads(line)
                self.answers[exchange["key"]].append(exchange["response"])
                self.requests.append(exchange.get("request") or {})
                self.responses.append(exchange["response"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ModelError(
                    f"cassette {path} line {number} is not a recorded exchange ({exc}): re-record it"
                ) from exc

    def next_answer(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            answers = self.answers.get(key)
            if not answers:
                return None
            position = min(self.served[key], len(answers) - 1)
            self.served[key] += 1
            return answers[position]

    def nearest(self, request: dict[str, Any]) -> int | None:
        """The recorded exchange most like `request`: among those with as many messages and tools of the same
        names (the same node asking; a tool's description names its task), the most similar canonical text."""
        wanted = _request_lines(request)
        alike = [n for n, recorded in enumerate(self.requests)
                 if len(recorded.get("messages", ())) == len(request["messages"])
                 and _tool_names(recorded.get("tools", [])) == _tool_names(request["tools"])]
        if not alike:
            return None
        return max(alike, key=lambda n: difflib.SequenceMatcher(None, _request_lines(self.requests[n]),
                                                                wanted).ratio())

    def nearest_difference(self, request: dict[str, Any], limit: int = 12) -> str:
        """How `request` differs from the most similar recorded one (canonical text, a few diff lines)."""
        wanted = _request_lines(request)
        recorded = [_request_lines(candidate) for candidate in self.requests]
        if not recorded:
            return ""
        nearest = max(recorded, key=lambda lines: difflib.SequenceMatcher(None, lines, wanted).ratio())
        return _difference(nearest, wanted, limit)

    def difference_from(self, position: int, request: dict[str, Any], limit: int = 12) -> str:
        """How `request` differs from the recorded request at `position`."""
        return _difference(_request_lines(self.requests[position]), _request_lines(request), limit)


def _tool_names(tools: list[dict[str, Any]]) -> list[Any]:
    return [tool.get("function", {}).get("name", tool) for tool in tools]


def _difference(recorded: list[str], wanted: list[str], limit: int) -> str:
    """The changed lines between a recorded request and an asked one, the first `limit` of them."""
    diff = difflib.unified_diff(recorded, wanted, "recorded", "asked", n=0, lineterm="")
    changed = [line if len(line) <= 160 else line[:160] + "..." for line in diff
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    shown = "\n".join(changed[:limit]) + (f"\n... {len(changed) - limit} more" if len(changed) > limit else "")
    return f"Nearest recorded request differs in:\n{shown}" if changed else ""


def _request_lines(request: dict[str, Any]) -> list[str]:
    return json.dumps(request, sort_keys=True, ensure_ascii=False, indent=0, default=str).replace(
        "\\n", "\n"
    ).split("\n")


def _read_lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except FileNotFoundError as exc:
        raise ModelError(f"cassette {path} does not exist: record it first with RecordingChatModel") from exc


class ReplayChatModel(_CassetteModel):
    """Serves a cassette back: the answer recorded for the same request key, never a live model.

    When one key was recorded several times (the same prompt asked again), the answers are served in the
    order recorded and the last one repeats after that. A request whose key the cassette does not hold
    raises `CassetteMissError`. Its name (`replay:<file>`) marks traces and reports as replayed.
    """

    path: Path
    tools: list[dict[str, Any]] = Field(default_factory=list)
    # None: a miss raises. A callable: a miss is answered with the nearest recorded exchange of the same node,
    # and the callable hears how the request differed (a replay on a slower machine, whose verdicts differ
    # from the recording's, goes on and says so instead of stopping).
    on_divergence: Any = None
    _cassette: _Cassette = PrivateAttr()

    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        super().__init__(path=Path(path), **kwargs)
        self._cassette = _Cassette(self.path)

    llm_kind: ClassVar[str] = "replay"

    @property
    def display_name(self) -> str:
        return f"replay:{self.path.name}"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any):
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "replay"
        params["ls_model_name"] = self.display_name
        return params

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> ReplayChatModel:
        bound = self.model_copy(update={"tools": tool_schemas(tools, tool_choice)})
        bound._cassette = self._cassette
        return bound

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        key = request_key(messages, self.tools)
        answer = self._cassette.next_answer(key)
        if answer is None and self.on_divergence is not None:
            request = canonical_request(messages, self.tools)
            position = self._cassette.nearest(request)
            if position is not None:
                self.on_divergence(self._cassette.difference_from(position, request))
                answer = self._cassette.responses[position]
        if answer is None:
            difference = self._cassette.nearest_difference(canonical_request(messages, self.tools))
            raise CassetteMissError(
                f"cassette {self.path.name} holds no answer for request {key[:16]} "
                f"({len(messages)} messages, {len(self.tools)} tools; last user message: "
                f"{_last_user_text(messages)!r}). A recording answers only the stream it was recorded on (same "
                f"operators, order, policy, budget, top-k and starting memory, so the same item ids); elsewhere, "
                f"e.g. under `langgraph dev`, use a real model. On that stream, the prompt, the tools or the code "
                f"that builds them changed since recording: re-record the cassette with RecordingChatModel"
                + (f"\n{difference}" if difference else "")
            )
        return ChatResult(generations=[ChatGeneration(message=response_from_dict(answer))])


def _last_user_text(messages: Sequence[BaseMessage], limit: int = 200) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            text = str(message.text)
            return text if len(text) <= limit else text[:limit] + "..."
    return ""
