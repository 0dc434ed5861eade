"""Tasks whose reference is a `Model(nn.Module)` with input factories (KernelBench and NPUKernelBench styles).

How a module maps onto the kernel's C ABI: the forward arguments that are tensors become the kernel's
inputs in order, named after forward's parameters (a list of tensors becomes one input per item, `name[i]`;
a None, an optional input the case leaves out, becomes none: `CaseInstance.arguments` keeps the structure);
the module's parameters and buffers follow as inputs named `param.<name>` / `buffer.<name>`; scalar forward
arguments and scalar constructor arguments, given or left at their defaults, become attributes named after
their parameters, and the hyperparameters of the PyTorch layers inside (their `__constants__`: a BatchNorm's
`eps` and `momentum`, a convolution's `stride` and `padding`) attributes named `<layer>.<name>`.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch

from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.model import (
    ATTR,
    NONE,
    OTHER,
    TENSOR,
    TENSORS,
    Argument,
    CaseInstance,
    Scalar,
    TestCase,
    as_outputs,
)


def _parameter_names(function: Callable[..., Any], count: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names + [f"arg{i}" for i in range(len(names), count)]


def _defaults_after(function: Callable[..., Any], given: int) -> dict[str, Any]:
    """The default values of the parameters after the first `given` positional ones."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params[given:]
            if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def layer_constants(model: torch.nn.Module) -> dict[str, Scalar]:
    """The scalar hyperparameters of the layers inside a module (`bn.eps`, `conv.stride`), as PyTorch lists
    them in each layer class's `__constants__`."""
    found: dict[str, Scalar] = {}
    for prefix, layer in model.named_modules():
        for name in getattr(type(layer), "__constants__", ()):
            attr = _as_attr(getattr(layer, name, None))
            if attr is not None and prefix:
                found[f"{prefix}.{name}"] = attr
    return found


def _as_attr(value: Any) -> Scalar | None:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return tuple(value)
    if (isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point()
            and value.device.type != "meta"):  # a meta tensor has no value to read
        return int(value.item())
    return None


def _tensor_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def module_instantiate(
    model_class: type[torch.nn.Module],
    make_inputs: Callable[[TestCase], Sequence[Any]],
    make_init_inputs: Callable[[TestCase], Sequence[Any]],
    scope: Callable[[TestCase], AbstractContextManager[Any]] = lambda case: nullcontext(),
) -> Callable[[TestCase, int], CaseInstance]:
    """An `instantiate(case, seed)` for a module-style task (these files draw from the global RNGs).
    `scope(case)` is entered around every call into the task's code (building, inputs, the reference)."""

    def instantiate(case: TestCase, seed: int) -> CaseInstance:
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)
        with torch_npu_standin(), scope(case):
            init_args = list(make_init_inputs(case))
            model = model_class(*init_args)  # training mode, as the suites build it (BatchNorm uses batch statistics)
            forward_args = list(make_inputs(case))
        inputs: dict[str, torch.Tensor] = {}
        attrs: dict[str, Scalar] = {}
        arguments: list[Argument] = []
        for name, value in zip(_parameter_names(model.forward, len(forward_args)), forward_args, strict=True):
            if isinstance(value, torch.Tensor):  # a 0-dim one too: the suite's kernel receives it as a tensor
                inputs[name] = value.detach().contiguous()
                arguments.append(Argument(name, TENSOR, (name,)))
            elif (attr := _as_attr(value)) is not None:
                attrs[name] = attr
                arguments.append(Argument(name, ATTR, (name,)))
            elif _tensor_list(value):  # a list of tensors (NPUKernelBench's foreach ops): one input each
                items = {f"{name}[{i}]": t.detach().contiguous() for i, t in enumerate(value)}
                inputs.update(items)
                arguments.append(Argument(name, TENSORS, tuple(items)))
            else:  # None (an optional input left out), or what no kernel ABI carries
                arguments.append(Argument(name, NONE if value is None else OTHER))
        for name, tensor in model.named_parameters():
            inputs[f"param.{name}"] = tensor.detach().contiguous()
        for name, tensor in model.named_buffers():
            inputs[f"buffer.{name}"] = tensor.detach().contiguous()
        for name, value in zip(_parameter_names(model_class.__init__, len(init_args) + 1)[1:], init_args, strict=True):
            attr = _as_attr(value)
            if attr is not None:
                attrs[name if name not in attrs else f"init_{name}"] = attr
        for name, value in _defaults_after(model_class.__init__, len(init_args) + 1).items():
            if (attr := _as_attr(value)) is not None and name not in attrs and f"init_{name}" not in attrs:
                attrs[name] = attr  # a constructor default the suite leaves as it is (eps=1e-5, ...)
        attrs.update(layer_constants(model))

        def returned() -> Any:
            with torch.no_grad(), torch_npu_standin(), scope(case):  # some import torch_npu when called
                return model(*forward_args)

        return CaseInstance(inputs, attrs, lambda: as_outputs(returned()), tuple(arguments), returned)

    return instantiate

