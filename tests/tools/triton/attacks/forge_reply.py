# Hostile: takes over the runner (the real builtins, then the runner's module) and has it answer "ok" to every
# call without computing anything. The judge reads the outputs itself: still poisoned.
import torch


def ks_kernel(inputs, outputs, attrs):
    sys = torch.__builtins__["__import__"]("sys")
    runner = sys.modules["__main__"].Runner
    runner.run = lambda self: {"ok": True}
