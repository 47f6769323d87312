#!/usr/bin/env bash
# What speculative decoding costs on one NVIDIA H200 (the device tool's nvidia-h200), with no Bun there: builds
# libsplash's C sources with the Vulkan backend (gpu-common.sh), checks the kernels against the CPU backend
# (vulkan_ops_test --quick, with the drafters' attention_ext; --sample: the device's sampled tokens against the CPU's,
# at the 248,320-token vocabulary too), writes vulkan_bench's sparse Qwen3.8-27B (64 layers, q4)
# and measures its decode step, then draft_lab on it: a verify block of 8 rows, the same step also drafting the next 8
# (one speculative cycle, one call; the draft's cost is the difference) and four sequences of each against one decode
# step, with the speedups they predict at τ = 3.4 and 5.5, a decode step sampled at temperature > 0 on the device and on
# the host, and a verify block at temperature > 0; and ttft_lab on splash-tiny (models/ travels with the tree):
# the first token of an 8K-token prompt whose prefix the prefix cache holds against the prompt computed whole.
#
#   carry:  .gl and build/gen, as gpu-h200.sh says
#   run:    bash scripts/bench/draft-h200.sh
#   output: the tables on stdout; logs in $OUT (or /tmp/splash-gpu-out)
#
# Locally (lavapipe, tiny shapes, to try the script itself): SPLASH_GPU_SMOKE=1 bash scripts/bench/draft-h200.sh
set -u
cd "$(dirname "$0")/../.."
. scripts/bench/gpu-common.sh
SMOKE=${SMOKE:-${SPLASH_GPU_SMOKE:-0}}

gpu_loader
gpu_build tests/vulkan_ops_test tools/vulkan_bench tools/draft_lab tools/ttft_lab

if [ "$SMOKE" = 1 ]; then
  SHAPE=tiny; BENCH_ARGS="--context 128,256 --chunk 32 --steps 2"; LAB_ARGS="--draft-shape tiny --context 64 --reps 2"
  TTFT_ARGS="--prefix 512 --reps 1"
else
  SHAPE=27b; BENCH_ARGS="--context 1024,2048 --chunk 256 --steps 4"; LAB_ARGS="--draft-shape 27b --context 1024 --reps 5"
  TTFT_ARGS="--prefix 8192 --reps 3"
fi

stage "kernels against the CPU backend (quick set, with attention_ext)"
timeout 90 "$B/vulkan_ops_test" --quick > "$OUT/ops.log" 2>&1
echo "exit $?"; grep -E "device|NOT OK|checks|attention_ext" "$OUT/ops.log"

stage "the sampler against the CPU's, token for token (knife edges; 1,000 and 248,320 ids)"
timeout 120 "$B/vulkan_ops_test" --sample > "$OUT/sample.log" 2>&1
echo "exit $?"; grep -E "NOT OK|checks|time" "$OUT/sample.log"

stage "the target: vulkan_bench's sparse checkpoint and its decode step"
timeout 200 "$B/vulkan_bench" --shape "$SHAPE" --quant q4 --dir /tmp/splash-vulkan-bench $BENCH_ARGS > "$OUT/bench.log" 2>&1
echo "exit $?"; grep -E "^  (decode|one decode)|read bandwidth|wrote" "$OUT/bench.log"

stage "draft_lab: verify blocks and DFlash drafts against one decode step"
TARGET=$(ls -d /tmp/splash-vulkan-bench/"$SHAPE"-*l | head -1)
timeout 200 "$B/draft_lab" --target "$TARGET" --quant q4 $LAB_ARGS > "$OUT/draft.log" 2>&1
echo "exit $?"; cat "$OUT/draft.log"

stage "ttft_lab: a prefix-cache hit against a miss (splash-tiny, int8 KV)"
timeout 120 "$B/ttft_lab" --model models/splash-tiny --backend vulkan $TTFT_ARGS > "$OUT/ttft.log" 2>&1
echo "exit $?"; cat "$OUT/ttft.log"
stage "done"
