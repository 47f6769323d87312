#!/usr/bin/env bash
# The prefill measurements on one NVIDIA H200 (the device tool's nvidia-h200), in one command, with no Bun there:
# builds libsplash's C sources with the Vulkan backend (gcc; the SPIR-V kernels come prebuilt in build/gen, made here
# by `bun scripts/build/native.ts`), checks every kernel against the CPU backend (vulkan_ops_test, which runs the
# cooperative-matrix GEMM on every tile where the device has it), measures the H200's dense f16/bf16 matrix rate
# through PyTorch (the denominator of the GEMM rows), then vulkan_prefill_lab (GEMM per launch, attention at 0 and at
# 32K, GDN) on the 27B and 35B-A3B shapes, and vulkan_bench's prefill rows.
#
#   carry:  .gl (Vulkan loader and headers, see scripts/bench/gpu-h200.sh), build/gen
#   run:    bash scripts/bench/gpu-prefill-h200.sh     (SPLASH_PREFILL_BENCH="27b:q4:1024:int8 …" picks the vulkan_bench
#           runs: shape, weights, chunk and KV type, f32 where none is given)
#   output: the tables on stdout; logs in $OUT (or /tmp/splash-gpu-out): build.log, ops.log, lab.log, bench.log,
#           bench.jsonl (few files: the device tool returns at most 8)
#   SPLASH_PREFILL_STAGES="ops torch lab bench" (the default) picks the stages after the build, run in that order;
#   "coopmat" runs native/tools/vulkan_coopmat_lab on the variants scripts/bench/coopmat-lab.sh compiled into
#   build/coopmat-lab (carry it; its `flash` set: the flash attention kernel on each KV type at 0 and at 32K). "gemm"
#   times every cooperative-matrix GEMM tile (the defaults and kernels/generate.ts' candidates) on the real matrices of
#   SPLASH_PREFILL_GEMM_MODELS (the 27B by default) at 1024 rows, q4 and bf16, prints the table and writes the tiles that
#   beat the defaults as a tuning file, $OUT/gemm-<model>.json (its "gemmCoopmat" entries go into models/<model>/vulkan.json;
#   the stages after it in the same call use them). The GEMM tuning in one command, every tile checked first (ops):
#     SPLASH_PREFILL_STAGES="ops gemm" SPLASH_PREFILL_OPS=--quick bash scripts/bench/gpu-prefill-h200.sh
#   "moe" checks the routed experts of prefill chunks (vulkan_ops_test --moe: the matrix units against the CPU op and
#   against the GEMV tiles) and times both paths on the 35B-A3B's experts (vulkan_prefill_lab --parts moe, q4 and bf16
#   unless SPLASH_PREFILL_LAB_TYPES, chunks of SPLASH_PREFILL_MOE_N tokens, 1024 by default). The MoE change in one call:
#     SPLASH_PREFILL_STAGES="moe bench ops" SPLASH_PREFILL_OPS=--quick SPLASH_PREFILL_BENCH=35b:q4:1024 bash scripts/bench/gpu-prefill-h200.sh
#   SPLASH_PREFILL_MODELS picks the lab's models (both by default),
#   SPLASH_PREFILL_OPS=--quick the short ops test, SPLASH_PREFILL_LAB_TYPES the lab's GEMM weight types ("none": attention
#   and GDN only).
#
# Locally (lavapipe, tiny shapes): SPLASH_GPU_SMOKE=1 bash scripts/bench/gpu-prefill-h200.sh
set -u
cd "$(dirname "$0")/../.."
. scripts/bench/gpu-common.sh
SMOKE=${SPLASH_GPU_SMOKE:-0}
STAGES=${SPLASH_PREFILL_STAGES:-ops torch lab bench}

gpu_loader
gpu_build tests/vulkan_ops_test tools/vulkan_prefill_lab tools/vulkan_bench tools/vulkan_coopmat_lab

if [ "$SMOKE" = 1 ]; then
  OPS="--quick"; MODELS="tiny"; LAB="--n 40 --context 200 --reps 2"; BENCH="--shape tiny --context 128,256 --chunk 32 --steps 2"
else
  OPS=${SPLASH_PREFILL_OPS:-}; MODELS=${SPLASH_PREFILL_MODELS:-"qwen3.8-27b qwen3.6-35b-a3b"}; LAB=""; BENCH=""
fi

run_coopmat() {
  stage "vulkan_coopmat_lab: what bounds the cooperative-matrix GEMM"
  if [ "$SMOKE" = 1 ]; then CM="--m 256 --n 128 --k 256 --reps 2"; else CM=""; fi
  timeout 240 "$B/vulkan_coopmat_lab" build/coopmat-lab/list.txt $CM 2>&1 | tee "$OUT/coopmat.log"
  echo "exit ${PIPESTATUS[0]}"
}

run_ops() {
  stage "kernels against the CPU backend"
  timeout 200 "$B/vulkan_ops_test" $OPS > "$OUT/ops.log" 2>&1
  echo "exit $?"; grep -E "device|NOT OK|checks|time:|coopmat|f16 matrix units|skip" "$OUT/ops.log"
}

run_moe() {
  stage "MoE experts of prefill chunks against the CPU backend (vulkan_ops_test --moe)"
  timeout 120 "$B/vulkan_ops_test" --moe > "$OUT/ops-moe.log" 2>&1
  echo "exit $?"; grep -E "device|NOT OK|checks|time:|matrix units|skip" "$OUT/ops-moe.log"
  local m=qwen3.6-35b-a3b args="--n ${SPLASH_PREFILL_MOE_N:-1024}"
  [ "$SMOKE" = 1 ] && m=tiny && args="--n 40 --reps 2"
  stage "MoE experts, GEMV tiles against the matrix units (vulkan_prefill_lab --parts moe, $m)"
  timeout 120 "$B/vulkan_prefill_lab" --model "$m" --types "${SPLASH_PREFILL_LAB_TYPES:-q4,bf16}" --parts moe $args 2>&1 | tee -a "$OUT/lab.log"
  echo "exit ${PIPESTATUS[0]}"
}

run_gemm() {
  local models=${SPLASH_PREFILL_GEMM_MODELS:-qwen3.8-27b} args=""
  [ "$SMOKE" = 1 ] && models=tiny && args="--n 40 --reps 2"
  for m in $models; do
    stage "cooperative-matrix GEMM tiles, $m (vulkan_prefill_lab --parts gemm; * = the default tile)"
    rm -f "$OUT/gemm-$m.json"
    timeout 150 "$B/vulkan_prefill_lab" --model "$m" --types q4,bf16 --parts gemm --out "$OUT/gemm-$m.json" $args > "$OUT/gemm-one.log" 2>&1
    echo "exit $? (every launch in gemm.log; here the fastest tile per matrix)"
    cat "$OUT/gemm-one.log" >> "$OUT/gemm.log"
    grep -E "^vulkan_prefill_lab|^GEMM|->|NOT OK|all matrices" "$OUT/gemm-one.log"
    rm -f "$OUT/gemm-one.log"
    [ -f "$OUT/gemm-$m.json" ] && cat "$OUT/gemm-$m.json" && export SPLASH_VULKAN_TUNING=$OUT/gemm-$m.json
  done
}

run_torch() {
  [ "$SMOKE" = 1 ] && return
  stage "dense f16 / bf16 matrix rate (PyTorch, 8192^3, random data, median of 20)"
  timeout 60 python3 - <<'EOF' 2>&1
import torch
for dt in (torch.float16, torch.bfloat16):
    a = torch.randn(8192, 8192, device="cuda", dtype=dt); b = torch.randn(8192, 8192, device="cuda", dtype=dt)
    for _ in range(3): a @ b
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    print(f"dense {dt}: {2 * 8192**3 / (ts[10] * 1e-3) / 1e12:.0f} TFLOP/s")
EOF
}

run_lab() {
  for m in $MODELS; do
    stage "vulkan_prefill_lab $m"
    types=q4,bf16; [ "$m" = qwen3.6-35b-a3b ] && types=q4
    types=${SPLASH_PREFILL_LAB_TYPES:-$types}  # "none": attention and GDN only
    timeout 150 "$B/vulkan_prefill_lab" --model "$m" --types "$types" $LAB 2>&1 | tee -a "$OUT/lab.log"
    echo "exit ${PIPESTATUS[0]}"
  done
}

run_bench() {
  stage "vulkan_bench prefill (shape:quant:chunk[:kv type])"
  if [ "$SMOKE" = 1 ]; then runs="tiny:q4:32:int8"; else runs=${SPLASH_PREFILL_BENCH:-"27b:q4:1024:int8 27b:q4:1024:f16 27b:q4:4096:int8 27b:bf16:1024:int8 35b:q4:1024:int8"}; fi
  for r in $runs; do
    IFS=: read -r s q c kv <<< "$r"
    kv=${kv:-f32}
    if [ "$SMOKE" = 1 ]; then args="$BENCH"; else args="--shape $s --chunk $c --steps 2"; fi
    timeout 120 "$B/vulkan_bench" $args --quant "$q" --kv-type "$kv" --dir /tmp/splash-vulkan-bench --json "$OUT/bench.jsonl" > "$OUT/bench-one.log" 2>&1
    echo "$s $q chunk $c, $kv KV: exit $?"; cat "$OUT/bench-one.log" >> "$OUT/bench.log"; grep -E "prefill|measured" "$OUT/bench-one.log"
  done
  rm -f "$OUT/bench-one.log"
}

for s in $STAGES; do "run_$s"; done
stage "done"
