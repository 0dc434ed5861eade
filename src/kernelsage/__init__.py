"""kernelsage: a frozen LLM that learns to write fast, correct accelerator kernels by evolving a memory."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernelsage")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
