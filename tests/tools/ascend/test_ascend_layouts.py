"""The CANN layout probe: each known layout found from the files present, with the include and link sets it
derives, the release read as CANN names it, and a missing part named before any build."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.tools.ascend.standin_cann import ARCH, ascendc_install, environ_for, tikcpp_install

from kernelsage.tools.ascend.commands import direct_plan
from kernelsage.tools.ascend.glue import HostHeaders
from kernelsage.tools.ascend.layouts import OPTIONAL_LIBS, REQUIRED_LIBS, probe_layout
from kernelsage.tools.ascend.sandboxing import cann_root
from kernelsage.tools.ascend.toolchain import ToolchainProblem, cann_version, detect_toolchain


def test_the_tikcpp_layout_keeps_the_include_set_it_always_had(standin_home: Path) -> None:
    layout = probe_layout(standin_home)
    assert layout is not None and layout.name == "tikcpp"
    tik = standin_home / "compiler" / "tikcpp"
    assert layout.includes == tuple(map(str, (standin_home / "include", tik, tik / "tikcfw", tik / "tikcfw" / "impl",
                                              tik / "tikcfw" / "interface")))
    assert layout.lib_dirs == (str(standin_home / "lib64"),) and layout.missing == ()


def test_the_ascendc_layout_takes_the_existing_upstream_directories_and_libraries(ascendc_home: Path) -> None:
    layout = probe_layout(ascendc_home)
    assert layout is not None and layout.name == "ascendc"
    assert layout.header == str(ascendc_home / "compiler/ascendc/include/basic_api/kernel_operator.h")
    relative = [str(Path(p).relative_to(ascendc_home)) for p in layout.includes]
    # only what exists: this install has no include/experiment or compiler/tikcpp/include
    assert relative == ["include", "compiler/ascendc/include/basic_api", "compiler/ascendc/include/basic_api/impl",
                        "compiler/ascendc/include/basic_api/interface", "compiler/ascendc/include/highlevel_api/tiling",
                        "compiler/ascendc/impl/aicore/basic_api"]
    # lib64 links to <arch>-linux/lib64: one directory, named once
    assert layout.lib_dirs == (str(ascendc_home / "lib64"),)
    # required in link order (archives first), the optional one present (9.x's log library), then the system's
    assert layout.libraries == (*REQUIRED_LIBS, "unified_dlog", "m", "dl")
    assert not set(OPTIONAL_LIBS) - {"unified_dlog"} & set(layout.libraries)
    flags = layout.link_flags()
    assert flags[:2] == [f"-L{ascendc_home / 'lib64'}", f"-Wl,-rpath,{ascendc_home / 'lib64'}"]
    assert flags.index("-lascendc_runtime") < flags.index("-lruntime")


def test_the_toolchain_finds_bisheng_in_the_arch_directory_and_names_the_layout(ascendc_home: Path) -> None:
    toolchain = detect_toolchain(environ_for(ascendc_home))
    assert toolchain.bisheng == str(ascendc_home / ARCH / "ccec_compiler" / "bin" / "bisheng")
    assert toolchain.cann_version == "9.0.0.standin"
    assert "layout ascendc" in toolchain.describe()
    # CANN 8.5's install directory (cann-<version>): the sandbox binds the whole Ascend root read-only
    assert cann_root(ascendc_home) == os.path.realpath(ascendc_home.parent)


def test_the_direct_plan_links_the_kernel_alone_first_with_no_undefined_symbol(ascendc_home: Path) -> None:
    toolchain = detect_toolchain(environ_for(ascendc_home))
    headers = HostHeaders(torch_includes=("/t/include",), torch_lib="/t/lib", torch_npu_root="/n",
                          python_include="/p", cxx11_abi=1)
    kernel, check, link = direct_plan(toolchain, "dav-2201", headers)
    assert [s.name for s in (kernel, check, link)] == ["kernel", "runtime-check", "link"]
    assert f"-I{ascendc_home / 'compiler/ascendc/include/basic_api/interface'}" in kernel.argv
    assert check.argv[1:3] == ("-shared", "kernel.o") and "-Wl,--no-undefined" in check.argv
    assert "glue_direct.o" not in check.argv and "-ltorch" not in check.argv
    for flag in ("-lruntime", "-lascendc_runtime", "-lregister", "-lprofapi", "-lm", "-ldl"):
        assert flag in check.argv and flag in link.argv


@pytest.mark.parametrize("missing", ["runtime", "ascendc_runtime", "profapi"])
def test_a_missing_runtime_library_is_named_before_any_build(tmp_path: Path, missing: str) -> None:
    home = ascendc_install(tmp_path, omit=(missing,))
    with pytest.raises(ToolchainProblem) as error:
        detect_toolchain(environ_for(home))
    message = str(error.value)
    assert f"lacks lib{missing}.so in {home / 'lib64'}" in message and "layout ascendc" in message
    assert "\n" not in message


def test_an_install_without_a_known_header_location_is_one_clear_error(tmp_path: Path) -> None:
    home = tikcpp_install(tmp_path)
    shutil.rmtree(home / "compiler")
    with pytest.raises(ToolchainProblem, match=r"no kernel_operator.h where known layouts keep it \("
                                                r"compiler/ascendc/include/basic_api/kernel_operator.h"):
        detect_toolchain(environ_for(home))


def test_the_release_is_read_as_cann_names_it(tmp_path: Path) -> None:
    # as CANN 8.1.RC1 installs them: the inner version first, the release after the colon or in version_dir
    (tmp_path / "version.cfg").write_text("# version: 1.0\nruntime_running_version=[7.7.0.1.238:8.1.RC1]\n")
    assert cann_version(tmp_path) == "8.1.RC1"
    (tmp_path / "version.cfg").unlink()
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "version.info").write_text("Version=7.7.0.1.238\nversion_dir=8.1.RC1\n")
    assert cann_version(tmp_path) == "8.1.RC1"
