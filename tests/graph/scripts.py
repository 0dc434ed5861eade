"""Scripted answers for episode tests (the model is a labelled test double, see ScriptedChatModel)."""

from __future__ import annotations

import re
from collections.abc import Callable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from kernelsage.parsing import AdoptionRecord, render_answer

BROKEN = '#include "kernelsage_cpu.h"\nint ks_kernel(const ks_tensor* in, int n, ks_tensor* out, int m,\n' \
         '              const ks_attr* a, int k) {\n    return 0\n}\n'

SLOW = """#include "kernelsage_cpu.h"
#include <cstdint>
int ks_kernel(const ks_tensor* in, int n_in, ks_tensor* out, int n_out, const ks_attr* a, int n_a) {
    const int64_t n = ks_numel(&in[0]);
    if (in[0].dtype == KS_FLOAT32) {
        const float* x = (const float*)in[0].data; float* y = (float*)out[0].data;
        for (int pass = 0; pass < 16; ++pass)  // deliberately redundant work: a slow first version, slow enough
            // that no load on a busy machine makes the fast one look no faster (CI failed so at 6 passes)
            for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        return 0;
    }
    const uint16_t* x = (const uint16_t*)in[0].data; uint16_t* y = (uint16_t*)out[0].data;
    for (int64_t i = 0; i < n; ++i) { float v = ks_half_to_float(x[i]); y[i] = ks_float_to_half(v > 0.f ? v : 0.f); }
    return 0;
}
"""

WRONG = SLOW.replace("x[i] > 0.f ? x[i] : 0.f", "x[i] > 0.f ? x[i] : 1.f")
# SLOW's code with one pass: a sixteenth of the work, serial like it. The shipped relu example is parallel, and its
# threads can lose most of their speed on a machine busier than its cores (a barrier waits for a descheduled
# thread), so a comparison with it was not certain under load; between two serial kernels the ratio holds.
FAST = SLOW.replace("pass < 16", "pass < 1")
# Timed calls for a test whose verdict rests on "clearly faster": the method's 100, not the 20 of the suite's
# backend. A median's interval from 20 calls ends at the 16th, so a stall of the shared machine over 5 calls of the
# fast kernel widens it past a 10x gain (it did once in CI); from 100 calls it takes a stall over 40 of them.
MEDIAN_CALLS = 100


def shown_ids(messages: list[BaseMessage]) -> list[int]:
    """The memory ids the conversation showed last (what a model must answer for)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            ids = [int(i) for i in re.findall(r"^- id (\d+) \(", str(message.content), re.MULTILINE)]
            if ids:
                return ids
    return []


def candidate(source: str, adopt: Callable[[list[int]], set[int]] = lambda ids: set(ids[:1]),
              extra_ids: tuple[int, ...] = (), drop: int = 0) -> Callable[[list[BaseMessage]], AIMessage]:
    """An answer with `source` that adopts `adopt(shown)`; `drop` leaves out the last ids, `extra_ids`
    adds ids that were never shown (for the gate's tests)."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        ids = shown_ids(messages)
        adopted = adopt(ids)
        listed = ids[: len(ids) - drop] + list(extra_ids)
        records = {i: AdoptionRecord(adopted=i in adopted, rationale="used it" if i in adopted else "not needed")
                   for i in listed}
        return AIMessage(content=render_answer({"kernel.cpp": source}, records))

    return answer


def adoption_only(adopt_all: bool = False) -> Callable[[list[BaseMessage]], AIMessage]:
    """The gate's re-ask answer: every id the re-ask prompt lists."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        ids = shown_ids(messages)
        records = {i: AdoptionRecord(adopted=adopt_all, rationale="checked again") for i in ids}
        return AIMessage(content=render_answer({}, records))

    return answer


def tool_call(name: str, args: dict | None = None) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args or {}, "id": None}])


def example_source(name: str) -> str:
    """One of the reference kernels shipped with the CPU backend."""
    from importlib import resources

    return resources.files("kernelsage.tools.cpu").joinpath("examples", f"{name}.cpp").read_text()
