"""Tasks whose reference is a `Model(nn.Module)` with input factories (KernelBench and NPUKernelBench styles).

How a module maps onto the kernel's C ABI: the forward arguments that are tensors become the kernel's
inputs in order, named after forward's parameters; the module's parameters and buffers follow as inputs
named `param.<name>` / `buffer.<name>`; scalar forward arguments and scalar constructor arguments become
attributes named after their parameters.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.model import CaseInstance, Scalar, TestCase, as_outputs


def _parameter_names(function: Callable[..., Any], count: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names + [f"arg{i}" for i in range(len(names), count)]


def _as_attr(value: Any) -> Scalar | None:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        return int(value.item())
    return None


def module_instantiate(
    model_class: type[torch.nn.Module],
    make_inputs: Callable[[TestCase], Sequence[Any]],
    make_init_inputs: Callable[[TestCase], Sequence[Any]],
) -> Callable[[TestCase, int], CaseInstance]:
    """An `instantiate(case, seed)` for a module-style task (these files draw from the global RNGs)."""

    def instantiate(case: TestCase, seed: int) -> CaseInstance:
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)
        with torch_npu_standin():
            init_args = list(make_init_inputs(case))
            model = model_class(*init_args)  # training mode, as the suites build it (BatchNorm uses batch statistics)
            forward_args = list(make_inputs(case))
        inputs: dict[str, torch.Tensor] = {}
        attrs: dict[str, Scalar] = {}
        for name, value in zip(_parameter_names(model.forward, len(forward_args)), forward_args, strict=True):
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                inputs[name] = value.detach().contiguous()
            elif (attr := _as_attr(value)) is not None:
                attrs[name] = attr
            elif isinstance(value, torch.Tensor):
                inputs[name] = value.detach().contiguous()
        for name, tensor in model.named_parameters():
            inputs[f"param.{name}"] = tensor.detach().contiguous()
        for name, tensor in model.named_buffers():
            inputs[f"buffer.{name}"] = tensor.detach().contiguous()
        for name, value in zip(_parameter_names(model_class.__init__, len(init_args) + 1)[1:], init_args, strict=True):
            attr = _as_attr(value)
            if attr is not None:
                attrs[name if name not in attrs else f"init_{name}"] = attr

        def reference() -> tuple[torch.Tensor, ...]:
            with torch.no_grad(), torch_npu_standin():  # some references import torch_npu when called
                return as_outputs(model(*forward_args))

        return CaseInstance(inputs, attrs, reference)

    return instantiate

