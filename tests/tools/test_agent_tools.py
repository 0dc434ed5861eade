"""The LangChain tools, driven as a tool-calling model would call them."""

from __future__ import annotations

import json
from pathlib import Path

from kernelsage.tools.agent_tools import KernelSession, make_kernel_tools
from kernelsage.tools.results import Status

KERNELS = Path(__file__).resolve().parent / "kernels"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"


def test_tools_compile_verify_profile_and_diagnose(cpu_backend, relu32):
    session = KernelSession()
    tools = {tool.name: tool for tool in make_kernel_tools(cpu_backend, relu32, session)}
    assert set(tools) == {"compile_kernel", "verify_kernel", "profile_kernel", "show_mismatches",
                          "summarize_compiler_errors"}
    assert "source" in tools["compile_kernel"].args

    assert "compile a kernel successfully first" in tools["verify_kernel"].invoke({})

    broken = json.loads(tools["compile_kernel"].invoke({"source": (KERNELS / "compile_error.cpp").read_text()}))
    assert broken["ok"] is False and "kernel.cpp:6:" in broken["summary"]
    assert "kernel.cpp:6:" in tools["summarize_compiler_errors"].invoke({})

    json.loads(tools["compile_kernel"].invoke({"source": (KERNELS / "partial_write.cpp").read_text()}))
    verdict = json.loads(tools["verify_kernel"].invoke({}))
    assert verdict["correct"] is False and verdict["status"] == "partial_write"
    assert session.verified is not None and session.verified.status is Status.PARTIAL_WRITE
    assert "index [750]" in tools["show_mismatches"].invoke({"limit": 2})

    tools["compile_kernel"].invoke({"source": (EXAMPLES / "l1_relu.cpp").read_text()})
    assert json.loads(tools["verify_kernel"].invoke({}))["correct"] is True
    timing = json.loads(tools["profile_kernel"].invoke({}))
    assert timing["ok"] is True and timing["speedup"] > 0 and session.profiled.ok
