// kernelsage's header for suites' own Python glue (NPUKernelBench's validation/pybind.cpp includes a header of
// this name, its copy of torch_npu's aclnn calling helpers). This one includes torch_npu's own op-plugin helper,
// which defines the same EXEC_NPU_CMD and ConvertType (at::Tensor, c10::optional<at::Tensor>, at::TensorList,
// at::IntArrayRef, at::Scalar, scalars) and finds the custom operator's aclnn API through ASCEND_CUSTOM_OPP_PATH.
#ifndef KERNELSAGE_PYTORCH_NPU_HELPER_HPP_
#define KERNELSAGE_PYTORCH_NPU_HELPER_HPP_

#include <torch/extension.h>

#include <string>
#include <vector>

#include "op_plugin/utils/op_api_common.h"

#endif  // KERNELSAGE_PYTORCH_NPU_HELPER_HPP_
