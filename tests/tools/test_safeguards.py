"""Static safeguards: each kind of forbidden code is caught with its reason; legitimate code passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.tools.safeguards import scan_source

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"


@pytest.mark.parametrize(("line", "rule"), [
    ("#include <torch/extension.h>", "torch"),
    ("auto y = at::relu(x);", "torch"),
    ("cblas_sgemm(CblasRowMajor, 0, 0, m, n, k, 1.f, a, k, b, n, 0.f, c, n);", "blas"),
    ("#include <mkl.h>", "blas"),
    ("Eigen::MatrixXf m;", "eigen"),
    ("void* h = dlopen(\"libm.so\", 2);", "dynamic_loading"),
    ("std::system(\"ls\");", "process"),
    ("FILE* p = popen(\"ls\", \"r\");", "process"),
    ("execvp(\"sh\", args);", "process"),
    ("int s = socket(2, 1, 0);", "network"),
    ("asm volatile(\"syscall\");", "assembly"),
    ("syscall(39);", "syscall"),
    ("FILE* f = fopen(\"/etc/passwd\", \"r\");", "file_access"),
    ("std::ofstream out(\"../escape.txt\");", "file_access"),
    ("int fd = open(path, 0);", "file_access"),
    ("signal(11, handler);", "signals"),
])
def test_forbidden_code_is_caught(line, rule):
    violations = scan_source("kernel.cpp", f"#include <cstdio>\nvoid f() {{\n{line}\n}}\n")
    assert [v.rule for v in violations] == [rule]
    assert violations[0].line == 3 and violations[0].reason


def test_comments_and_strings_do_not_trigger_rules():
    source = '// we never call system() or dlopen()\n/* torch::relu */\nconst char* s = "popen(x) at::";\n'
    assert scan_source("kernel.cpp", source) == []


def test_relative_file_inside_the_sandbox_is_allowed():
    assert scan_source("kernel.cpp", 'FILE* f = fopen("scratch.bin", "wb");\n') == []


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.cpp")), ids=lambda p: p.name)
def test_reference_kernels_pass_the_scan(path):
    assert scan_source(path.name, path.read_text()) == []
