// Tunable kernel for l1_relu on the Ascend NPU (direct launch; `kernelsage tune -b ascend`, docs/tuning.md): the
// reference kernel (../../l1_relu.cpp) with its host tiling declared tunable. TILE_KB: the Unified Buffer tile of
// each of the four queue buffers, in KiB (clamped to what the UB holds); BLOCKS_PER_CORE: how many blocks each
// vector core gets (more, smaller shares). The tiling function (ks_launch) sets the kernel's tiling arguments
// from them; the kernel code does not change between configurations. Correct for every allowed value.
#include "kernel_operator.h"
#include "kernelsage_ascend.h"
#include "kernelsage_tuning.h"

KS_TUNABLE(TILE_KB, 32, 4, 8, 16, 40);
KS_TUNABLE(BLOCKS_PER_CORE, 1, 2, 4);

constexpr int32_t BUFFER_NUM = 2;

template <typename T>
class KernelRelu {
public:
    __aicore__ inline KernelRelu() {}

    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, uint64_t total, uint64_t share, uint32_t tile) {
        const uint64_t start = share * AscendC::GetBlockIdx();
        count_ = start < total ? (total - start < share ? total - start : share) : 0;
        tile_ = tile;
        xGm_.SetGlobalBuffer((__gm__ T*)x + start, count_);
        yGm_.SetGlobalBuffer((__gm__ T*)y + start, count_);
        pipe_.InitBuffer(inQueue_, BUFFER_NUM, tile_ * sizeof(T));
        pipe_.InitBuffer(outQueue_, BUFFER_NUM, tile_ * sizeof(T));
    }

    __aicore__ inline void Process() {
        for (uint64_t offset = 0; offset < count_; offset += tile_) {
            const uint32_t len = static_cast<uint32_t>(count_ - offset < tile_ ? count_ - offset : tile_);
            CopyIn(offset, len);
            Compute(len);
            CopyOut(offset, len);
        }
    }

private:
    __aicore__ inline void CopyIn(uint64_t offset, uint32_t len) {
        AscendC::LocalTensor<T> xLocal = inQueue_.AllocTensor<T>();
        AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(len * sizeof(T)), 0, 0, 0};
        AscendC::DataCopyPadExtParams<T> pad{false, 0, 0, 0};
        AscendC::DataCopyPad(xLocal, xGm_[offset], params, pad);  // the tail need not be 32-byte sized
        inQueue_.EnQue(xLocal);
    }

    __aicore__ inline void Compute(uint32_t len) {
        AscendC::LocalTensor<T> xLocal = inQueue_.DeQue<T>();
        AscendC::LocalTensor<T> yLocal = outQueue_.AllocTensor<T>();
        AscendC::Relu(yLocal, xLocal, len);
        outQueue_.EnQue(yLocal);
        inQueue_.FreeTensor(xLocal);
    }

    __aicore__ inline void CopyOut(uint64_t offset, uint32_t len) {
        AscendC::LocalTensor<T> yLocal = outQueue_.DeQue<T>();
        AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(len * sizeof(T)), 0, 0, 0};
        AscendC::DataCopyPad(yGm_[offset], yLocal, params);
        outQueue_.FreeTensor(yLocal);
    }

    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue_;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueue_;
    AscendC::GlobalTensor<T> xGm_, yGm_;
    uint64_t count_ = 0;
    uint32_t tile_ = 0;
};

extern "C" __global__ __aicore__ void relu_f32(GM_ADDR x, GM_ADDR y, uint64_t total, uint64_t share, uint32_t tile) {
    KernelRelu<float> op;
    op.Init(x, y, total, share, tile);
    op.Process();
}

extern "C" __global__ __aicore__ void relu_f16(GM_ADDR x, GM_ADDR y, uint64_t total, uint64_t share, uint32_t tile) {
    KernelRelu<half> op;
    op.Init(x, y, total, share, tile);
    op.Process();
}

int ks_launch(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs, const ks_npu* npu) {
    const ks_tensor& x = inputs[0];
    const int64_t element = x.dtype == KS_FLOAT32 ? 4 : x.dtype == KS_FLOAT16 ? 2 : 0;
    if (element == 0 || n_outputs != 1) return 1;
    const uint64_t total = static_cast<uint64_t>(ks_numel(&x));
    const uint64_t align = 32 / element;  // elements per 32-byte block
    // Two queues of two buffers each share the UB: a tile is at most a quarter of it, a whole number of blocks.
    uint64_t tile_bytes = static_cast<uint64_t>(TILE_KB) * 1024;
    const uint64_t ub_quarter = static_cast<uint64_t>(npu->ub_bytes) / 4;
    if (tile_bytes > ub_quarter) tile_bytes = ub_quarter;
    uint64_t tile = tile_bytes / element / align * align;
    if (tile == 0) tile = align;
    const uint64_t cores = static_cast<uint64_t>(npu->aiv_cores > 0 ? npu->aiv_cores : 1);
    uint64_t blocks = cores * static_cast<uint64_t>(BLOCKS_PER_CORE);
    uint64_t share = (total + blocks - 1) / blocks;
    share = (share + align - 1) / align * align;  // every block starts on a 32-byte boundary
    blocks = share ? (total + share - 1) / share : 1;
    if (blocks == 0) blocks = 1;
    GM_ADDR in = (GM_ADDR)x.data;
    GM_ADDR out = (GM_ADDR)outputs[0].data;
    if (x.dtype == KS_FLOAT32)
        relu_f32<<<static_cast<uint32_t>(blocks), nullptr, npu->stream>>>(in, out, total, share, static_cast<uint32_t>(tile));
    else
        relu_f16<<<static_cast<uint32_t>(blocks), nullptr, npu->stream>>>(in, out, total, share, static_cast<uint32_t>(tile));
    return 0;
}
