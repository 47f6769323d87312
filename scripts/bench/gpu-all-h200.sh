#!/usr/bin/env bash
# One device call for the whole GPU picture on one NVIDIA H200 (the device tool's nvidia-h200), for a lease too short
# for each script's own call: gpu-h200.sh (kernels against the CPU backend, dispatch costs, the whole models' prefill
# and decode rows; its SPLASH_GPU_* settings pass through), then on the library it built and the 27B checkpoint it
# wrote: vulkan_prefill_lab's Gated DeltaNet rows (token loop against chunks, 27B and 35B-A3B heads), the device's
# sampled tokens against the CPU's (vulkan_ops_test --sample) and draft_lab (a verify block of 8, a DFlash draft of 8 and
# 4 × 8 against one decode step; a step sampled at temperature > 0 on the device and on the host; a sampled verify
# block). Every log comes back in one archive.
#
#   carry:  .gl and build/gen, as gpu-h200.sh says
#   run:    bash scripts/bench/gpu-all-h200.sh      (SPLASH_ALL_PARTS="gpu gdn draft" picks the parts)
#   output: the tables on stdout; $OUT/logs.tar.gz (every log; the device tool returns at most 8 files)
#
# Locally (lavapipe, tiny shapes): SPLASH_GPU_SMOKE=1 bash scripts/bench/gpu-all-h200.sh
set -u
cd "$(dirname "$0")/../.."
FINAL=${OUT:-/tmp/splash-gpu-out}
LOGS=/tmp/splash-all-logs
rm -rf "$LOGS"; mkdir -p "$LOGS" "$FINAL"
export OUT=$LOGS
. scripts/bench/gpu-common.sh
SMOKE=${SPLASH_GPU_SMOKE:-0}
PARTS=${SPLASH_ALL_PARTS:-gpu gdn draft}

for part in $PARTS; do
  case $part in
  gpu)
    bash scripts/bench/gpu-h200.sh ;;
  gdn)
    gpu_build tools/vulkan_prefill_lab > /dev/null
    for m in $([ "$SMOKE" = 1 ] && echo tiny || echo "qwen3.8-27b qwen3.6-35b-a3b"); do
      stage "Gated DeltaNet prefill, token loop against chunks of 64 ($m)"
      timeout 120 "$B/vulkan_prefill_lab" --model "$m" --parts gdn $([ "$SMOKE" = 1 ] && echo --n 70 --reps 2) > "$LOGS/gdn-$m.log" 2>&1
      echo "exit $?"; grep -vE "^\s*$" "$LOGS/gdn-$m.log" | tail -12
    done ;;
  draft)
    gpu_build tools/draft_lab tools/vulkan_bench tests/vulkan_ops_test > /dev/null
    stage "the sampler against the CPU's, token for token (knife edges; 1,000 and 248,320 ids)"
    timeout 120 "$B/vulkan_ops_test" --sample > "$LOGS/sample.log" 2>&1
    echo "exit $?"; grep -E "NOT OK|checks|time" "$LOGS/sample.log"
    shape=$([ "$SMOKE" = 1 ] && echo tiny || echo 27b)
    target=$(ls -d /tmp/splash-vulkan-bench/"$shape"-*l 2>/dev/null | head -1)
    if [ -z "$target" ]; then
      stage "the target checkpoint (vulkan_bench writes it)"
      timeout 200 "$B/vulkan_bench" --shape "$shape" --quant q4 --dir /tmp/splash-vulkan-bench --layers 1 --steps 1 > "$LOGS/target.log" 2>&1
      target=$(ls -d /tmp/splash-vulkan-bench/"$shape"-*l | head -1)
    fi
    stage "draft_lab: verify blocks and DFlash drafts against one decode step ($target)"
    timeout 200 "$B/draft_lab" --target "$target" --quant q4 --draft-shape "$shape" \
      $([ "$SMOKE" = 1 ] && echo --context 64 --reps 2 || echo --context 1024 --reps 5) > "$LOGS/draft.log" 2>&1
    echo "exit $?"; cat "$LOGS/draft.log" ;;
  esac
done
tar czf "$FINAL/logs.tar.gz" -C "$LOGS" .
stage "done"
