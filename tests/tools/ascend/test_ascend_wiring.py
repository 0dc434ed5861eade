"""The agent on an NPUKernelBench task in kernel-only mode: the writing prompt names op_kernel/<kernel>.cpp as
the only file to write and shows the question's op_host and kernel template (the backend's files for the task,
read through the protocol), and the model's kernel reaches the build with the task (the suite's glue, the
question's op_host) instead of failing the layout check. The model is a scripted TEST DOUBLE; builds use the
STAND-IN toolchain (tests/tools/ascend/standin); the fixture task was written for kernelsage in the upstream
layout (tests/fixtures/npukernelbench)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from tests.graph.fakes import fake_embeddings

from kernelsage.graph import AgentModels, Context, build_graph
from kernelsage.graph.runner import run_episode
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.parsing import render_answer
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.ascend import commands
from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.glue import MODULE_FILE
from kernelsage.tools.ascend.suite_task import kernel_template_for_prompt

SUITE = Path(__file__).resolve().parents[2] / "fixtures" / "npukernelbench"
TASK_ID = "level2/Foreach/ForeachScaleList"
QUESTION = SUITE / "tasks" / TASK_ID / "question"
KERNEL_FILE = "op_kernel/foreach_scale_list.cpp"
# kernel-only: the signature ends at workspace, as the prompt's template shows it (the build adds the tiling)
KERNEL = """#include "kernel_operator.h"
extern "C" __global__ __aicore__ void foreach_scale_list(GM_ADDR x, GM_ADDR scale, GM_ADDR y,
                                                         GM_ADDR workspace) {}
"""


def _kernel_only_answer(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(content=render_answer({KERNEL_FILE: KERNEL}, {}))


def test_an_episode_writes_the_kernel_alone_and_it_is_built_with_the_question_host(
        standin_backend: AscendBackend, store: MemoryStore, namespace: str) -> None:
    """One round: the prompt, the parse of the answer's op_kernel file, the build through the task's glue,
    then the judge (which cannot start an NPU here: the round fails there, after the build)."""
    model = ScriptedChatModel([_kernel_only_answer])
    graph = build_graph(models=AgentModels(generator=model), backend=standin_backend,
                        tasks=partial(find_task, load_suite(SUITE)), memory_store=store,
                        embeddings=fake_embeddings())
    state = run_episode(graph.compile(), task_id=TASK_ID, level=2, backend="ascend",
                        model="scripted-test-double", episode_id=f"{namespace}-wiring",
                        context=Context(namespace=namespace, budget=1, seed_knowledge=False))

    writing = next(str(m.content) for m in model.requests[0] if isinstance(m, HumanMessage))
    assert f"## Files to write\n{KERNEL_FILE}\n" in writing
    host = (QUESTION / "op_host" / "foreach_scale_list.cpp").read_text()
    assert ("Given by the task: op_host/foreach_scale_list.cpp (fixed: built as shown, do not write it)\n"
            f"```cpp\n{host.rstrip()}\n```") in writing
    template = kernel_template_for_prompt((QUESTION / "op_kernel" / "foreach_scale_list.cpp").read_text())
    assert "GM_ADDR workspace)" in template and "tiling" not in template
    assert f"Given by the task: {KERNEL_FILE} (your starting point for this file)\n```cpp\n{template.rstrip()}" \
        in writing

    attempt = state["attempts"][0]
    compiled = attempt["evaluation"]["compile"]
    assert attempt["files"] == {KERNEL_FILE: KERNEL}
    assert compiled["ok"], compiled["log"]  # not the layout error a kernel alone gets without its task
    assert attempt["status"] != "compile_error"
    root = Path(compiled["artifact"]["path"])
    assert json.loads((root / commands.SUITE_GLUE).read_text()) == {"op": "foreach_scale_list"}
    assert "PYBIND11_MODULE(kernel_gen_ops, m)" in (root / MODULE_FILE).read_text()  # the task's own glue


def test_the_compile_tool_and_a_pooled_backend_carry_the_task_to_the_build(standin_backend: AscendBackend) -> None:
    """The diagnostician's compile tool writes the task's kernel file by default, and a stream's pooled backend
    (scale/devices.py) compiles with the task and offers the task's files as the backend it wraps does."""
    from kernelsage.scale.devices import PooledBackend
    from kernelsage.tools.agent_tools import make_kernel_tools
    from kernelsage.tools.backend import files_to_write, given_files
    from kernelsage.tools.results import Candidate

    task = find_task(load_suite(SUITE), TASK_ID)
    tools = {tool.name: tool for tool in make_kernel_tools(standin_backend, task)}
    assert json.loads(tools["compile_kernel"].invoke({"source": KERNEL}))["ok"]
    pooled = PooledBackend(standin_backend, pool=None)
    assert files_to_write(pooled, task) == (KERNEL_FILE,)
    assert set(given_files(pooled, task)) == {"op_host/foreach_scale_list.cpp", KERNEL_FILE}
    assert pooled.compile(Candidate(task_id=task.id, files={KERNEL_FILE: KERNEL}), task=task).ok
