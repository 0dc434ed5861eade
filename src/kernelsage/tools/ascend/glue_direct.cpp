// The Python module around a direct-launch candidate: NPU tensors in, ks_launch on the current NPU stream.
// Trusted code of kernelsage, compiled once per toolchain and linked with each candidate's kernel.o.
#include <torch/extension.h>

#include <string>
#include <vector>

#include "acl/acl.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "kernelsage_ascend.h"

namespace {

int32_t dtype_code(at::ScalarType type) {
    switch (type) {
        case at::kFloat: return KS_FLOAT32;
        case at::kDouble: return KS_FLOAT64;
        case at::kHalf: return KS_FLOAT16;
        case at::kBFloat16: return KS_BFLOAT16;
        case at::kInt: return KS_INT32;
        case at::kLong: return KS_INT64;
        case at::kChar: return KS_INT8;
        case at::kByte: return KS_UINT8;
        case at::kBool: return KS_BOOL;
        default: TORCH_CHECK(false, "kernelsage: unsupported dtype ", type);
    }
    return -1;
}

ks_tensor describe(const at::Tensor& tensor, const char* role, size_t index) {
    TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1, "kernelsage: ", role, " ", index,
                " is not on the NPU");
    TORCH_CHECK(tensor.is_contiguous(), "kernelsage: ", role, " ", index, " is not contiguous");
    TORCH_CHECK(tensor.dim() <= KS_MAX_DIMS, "kernelsage: ", role, " ", index, " has too many dimensions");
    ks_tensor view{};
    view.data = tensor.data_ptr();
    view.dtype = dtype_code(tensor.scalar_type());
    view.ndim = static_cast<int32_t>(tensor.dim());
    for (int64_t d = 0; d < tensor.dim(); ++d) {
        view.shape[d] = tensor.size(d);
        view.strides[d] = tensor.stride(d);
    }
    return view;
}

}  // namespace

// Attributes arrive as parallel lists (name, kind, int, float, ints, string), one entry per attribute.
int64_t run(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
            const std::vector<std::string>& names, const std::vector<int64_t>& kinds,
            const std::vector<int64_t>& ints, const std::vector<double>& floats,
            const std::vector<std::vector<int64_t>>& int_lists, const std::vector<std::string>& strings,
            const at::Tensor& workspace, const std::vector<int64_t>& memory, const std::string& soc) {
    TORCH_CHECK(memory.size() == 5, "kernelsage: memory sizes are ub, l1, l0a, l0b, l0c");
    size_t n_attrs = names.size();
    TORCH_CHECK(kinds.size() == n_attrs && ints.size() == n_attrs && floats.size() == n_attrs &&
                int_lists.size() == n_attrs && strings.size() == n_attrs, "kernelsage: attribute lists differ");
    std::vector<ks_tensor> in, out;
    for (size_t i = 0; i < inputs.size(); ++i) in.push_back(describe(inputs[i], "input", i));
    for (size_t i = 0; i < outputs.size(); ++i) out.push_back(describe(outputs[i], "output", i));
    std::vector<ks_attr> attrs(n_attrs);
    for (size_t k = 0; k < n_attrs; ++k) {
        attrs[k].name = names[k].c_str();
        attrs[k].kind = static_cast<int32_t>(kinds[k]);
        attrs[k].i = ints[k];
        attrs[k].f = floats[k];
        attrs[k].ints = int_lists[k].data();
        attrs[k].n_ints = static_cast<int64_t>(int_lists[k].size());
        attrs[k].s = strings[k].c_str();
    }
    int32_t device = 0;
    TORCH_CHECK(aclrtGetDevice(&device) == ACL_SUCCESS, "kernelsage: no current NPU");
    int64_t aiv = 0, aic = 0;
    TORCH_CHECK(aclGetDeviceCapability(static_cast<uint32_t>(device), ACL_DEVICE_INFO_VECTOR_CORE_NUM, &aiv) ==
                ACL_SUCCESS, "kernelsage: the vector core count is unknown");
    TORCH_CHECK(aclGetDeviceCapability(static_cast<uint32_t>(device), ACL_DEVICE_INFO_AI_CORE_NUM, &aic) ==
                ACL_SUCCESS, "kernelsage: the AI core count is unknown");
    ks_npu npu{};
    npu.stream = c10_npu::getCurrentNPUStream().stream();
    npu.device = device;
    npu.aiv_cores = static_cast<int32_t>(aiv);
    npu.aic_cores = static_cast<int32_t>(aic);
    npu.ub_bytes = memory[0];
    npu.l1_bytes = memory[1];
    npu.l0a_bytes = memory[2];
    npu.l0b_bytes = memory[3];
    npu.l0c_bytes = memory[4];
    npu.soc = soc.c_str();
    npu.workspace = workspace.numel() ? workspace.data_ptr() : nullptr;
    npu.workspace_bytes = workspace.numel() * workspace.element_size();
    return ks_launch(in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()),
                     attrs.data(), static_cast<int>(n_attrs), &npu);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("run", &run, "Launch the candidate's kernels on the current NPU stream; its return code.");
    m.attr("abi_version") = KS_ABI_VERSION;
}
