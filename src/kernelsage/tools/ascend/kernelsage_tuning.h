/*
 * kernelsage tunables for Ascend host code (`kernelsage tune`, docs/tuning.md). Include it where the host computes
 * the tiling: op_host/<op>.cpp of an msopgen operator, or kernel.cpp (ks_launch) of a direct-launch one. The
 * build places it beside those sources. At file or function scope,
 *
 *     KS_TUNABLE(TILE_LEN, 2048, 512, 1024, 4096);   // the allowed values; the first is the default
 *
 * declares `static constexpr long long TILE_LEN`: the default, or the value the tuner chose, which it writes as
 * `#define KS_TUNE_TILE_LEN KS_TUNED(1024)` into ks_tuning.h beside this header. The tiling function sets its
 * tiling field from it (`tiling.set_tileLength(TILE_LEN)`, or a launch argument); the kernel reads its tiling
 * data unchanged. A value the declaration does not list fails the build. The kernel must be correct for every
 * allowed value. The same macro as kernelsage_cpu.h's, written for C++11 (op_host may build with it).
 */
#ifndef KERNELSAGE_TUNING_H
#define KERNELSAGE_TUNING_H

#define KS_TUNED(value) ~, value /* the comma tells a set KS_TUNE_<name> from an unset one (an identifier) */
#define KS_TUNE_SECOND_(first, second, ...) second
#define KS_TUNE_SECOND(...) KS_TUNE_SECOND_(__VA_ARGS__)
#define KS_TUNE_FIRST_(first, ...) first
#define KS_TUNE_FIRST(...) KS_TUNE_FIRST_(__VA_ARGS__)
constexpr bool ks_tune_allowed(long long) { return false; }
template <typename First, typename... Rest>
constexpr bool ks_tune_allowed(long long value, First first, Rest... rest) {
    return value == (long long)first || ks_tune_allowed(value, rest...);
}
#define KS_TUNABLE(name, ...)                                                                              \
    static constexpr long long name = KS_TUNE_SECOND(KS_TUNE_##name, KS_TUNE_FIRST(__VA_ARGS__), ~);     \
    static_assert(ks_tune_allowed(name, __VA_ARGS__), "KS_TUNE_" #name " is not a value KS_TUNABLE lists")
#if defined(__has_include)
#if __has_include("ks_tuning.h")
#include "ks_tuning.h"
#endif
#endif

#endif /* KERNELSAGE_TUNING_H */
