#!/usr/bin/env bash
# The GPU benchmark on one NVIDIA H200 (the device tool's nvidia-h200), in one command of under 9 minutes, with no Bun
# there: builds libsplash's C sources with the Vulkan backend (gcc; the SPIR-V kernels come prebuilt in build/gen, made
# here by `bun scripts/build/native.ts`), checks every kernel against the CPU backend on the real shapes
# (vulkan_ops_test), measures the GEMV launch choices on the real matrices for 1, 4 and 16 x rows (vulkan_lab: its last
# lines are the "gemv" tuning for models/<id>/vulkan.json), then runs vulkan_bench on the whole models (every layer,
# nothing extrapolated) for Qwen3.8-27B q4, Qwen3.6-35B-A3B q4 and Qwen3.8-27B bf16: prefill and batch-1 decode at 1K
# and 32K, 4 and 16 streams, beside llama.cpp's CUDA numbers and as fractions of the measured bandwidth roofline.
#
#   carry:  .gl        libvulkan1, libvulkan-dev (headers) and the GL/EGL dispatch packages, fetched here once as
#                      /work/.library/device/README.md says (apt-get download … into .gl/)
#           build/gen  the generated kernels and their tables (vulkan_kernels.c/.h, gpu_kernels.c/.h)
#   run:    bash scripts/bench/gpu-h200.sh
#   output: the table on stdout; logs and bench.jsonl in $OUT (or /tmp/splash-gpu-out)
#
# Locally (lavapipe, tiny shapes, to try the script itself): SPLASH_GPU_SMOKE=1 bash scripts/bench/gpu-h200.sh
set -u
cd "$(dirname "$0")/../.."
. scripts/bench/gpu-common.sh
SMOKE=${SMOKE:-${SPLASH_GPU_SMOKE:-0}}
# seconds left of the budget (the caller's limit is 540; SPLASH_GPU_BUDGET for a shorter one)
BUDGET=${SPLASH_GPU_BUDGET:-470}
left() { echo $((BUDGET - ($(date +%s) - T0))); }

gpu_loader
gpu_build tests/vulkan_ops_test tools/vulkan_lab tools/vulkan_bench tools/vulkan_dispatch_lab tools/vulkan_attention_lab

if [ "$SMOKE" = 1 ]; then
  RUNS="tiny:q4 tiny-moe:q4"; LAB="tiny"; BENCH_ARGS="--context 128,256 --chunk 32 --steps 2"; OPS="--quick"
else
  RUNS="27b:q4 35b:q4 27b:bf16"; LAB="qwen3.8-27b,qwen3.6-35b-a3b"; BENCH_ARGS=""; OPS=""
fi
# A shorter run (less device time): SPLASH_GPU_RUNS ("shape:quant ..."; "shape:quant:float" runs the float GEMV instead of
# the integer-dot one, SPLASH_VULKAN_INT_DOT=0; "shape:quant:VAR=value,VAR=value" runs with those switches set), SPLASH_GPU_QUICK=1 (the ops test's quick set, no launch-choice lab: the
# benchmarks use the committed models/<id>/vulkan.json tuning), SPLASH_GPU_LAB_TYPES (the lab's weight types, q4,bf16),
# SPLASH_GPU_LAB_MODELS (the lab's models), SPLASH_GPU_LAB_N (its x row counts, 1,4,16), SPLASH_GPU_LAB=0 (no lab: the
# committed tuning), SPLASH_GPU_LAB=1 (the lab even with SPLASH_GPU_QUICK=1)
RUNS=${SPLASH_GPU_RUNS:-$RUNS}
LAB_TYPES=${SPLASH_GPU_LAB_TYPES:-q4,bf16}
LAB=${SPLASH_GPU_LAB_MODELS:-$LAB}
LAB_N=${SPLASH_GPU_LAB_N:-1,4,16}
# KV cache types each run is measured with (SPLASH_GPU_KV="f32 f16"), and workgroup counts for the split decode
# attention, measured at the long context after each run (SPLASH_GPU_ATTENTION="256,1024": vulkan_bench
# --attention-workgroups)
KVS=${SPLASH_GPU_KV:-f32}
ATTN=${SPLASH_GPU_ATTENTION:+--attention-workgroups $SPLASH_GPU_ATTENTION}
# Prefill chunk sizes each run measures (SPLASH_GPU_CHUNKS="512,1024,2048,4096": vulkan_bench --chunk; it names the
# fastest for a 32K prompt, the "prefillChunk" of models/<id>/vulkan.json)
CHUNKS=${SPLASH_GPU_CHUNKS:+--chunk $SPLASH_GPU_CHUNKS}
QUICK=${SPLASH_GPU_QUICK:-0}; [ "$QUICK" = 1 ] && OPS="--quick"
RUN_LAB=${SPLASH_GPU_LAB:-$([ "$QUICK" = 1 ] && echo 0 || echo 1)}

stage "kernels against the CPU backend (real and odd shapes)"
timeout $([ "$QUICK" = 1 ] && echo 60 || echo 150) "$B/vulkan_ops_test" $OPS > "$OUT/ops.log" 2>&1
echo "exit $?"; grep -E "device|NOT OK|checks|time:" "$OUT/ops.log"; grep -E "^OK .*(17408|5120|10240|1200|248320|256 experts|32 experts)" "$OUT/ops.log"

# The attention op alone (SPLASH_GPU_ATTENTION_LAB=1): its cases against the CPU backend (vulkan_ops_test --attention),
# then µs per call on the 27B's heads at 1K, 8K and 32K, each KV type, kv_write not timed (vulkan_attention_lab): one row
# at several split-decode workgroup targets (models/<id>/vulkan.json "attentionWorkgroups"), a block of 8 at the tuned one
if [ "${SPLASH_GPU_ATTENTION_LAB:-0}" = 1 ]; then
  stage "attention: cases against the CPU backend, then timings (vulkan_ops_test --attention, vulkan_attention_lab)"
  timeout 120 "$B/vulkan_ops_test" --attention > "$OUT/ops-attention.log" 2>&1
  echo "exit $?"; grep -E "NOT OK|checks|time:" "$OUT/ops-attention.log"
  small=$([ "$SMOKE" = 1 ] && echo "--past 256,1024 --calls 3 --reps 1")
  { timeout 60 "$B/vulkan_attention_lab" $small --rows 1 --workgroups 256,512,1024,2048
    timeout 60 "$B/vulkan_attention_lab" $small --rows 8 | tail -n +3; } 2>&1 | tee "$OUT/attention-lab.log"
fi

# What a dispatch costs apart from its work (vulkan_dispatch_lab), under each environment named in SPLASH_GPU_DISPATCH
# (space-separated; "default" = as it is, else VAR=value[,VAR=value]), e.g. SPLASH_GPU_DISPATCH="default SPLASH_VULKAN_INT_DOT=0"
if [ -n "${SPLASH_GPU_DISPATCH:-}" ]; then
  stage "dispatch cost (vulkan_dispatch_lab)"
  for v in $SPLASH_GPU_DISPATCH; do
    echo "-- $v"; env $([ "$v" = default ] || echo "$v" | tr , ' ') timeout 60 "$B/vulkan_dispatch_lab" $([ "$SMOKE" = 1 ] && echo --n 100 --reps 1) 2>&1 | tail -6
  done | tee "$OUT/dispatch.log"
fi

stage "matmul launch choices on the real matrices (vulkan_lab; the benchmarks below use its fastest)"
TUNING=/tmp/splash-gpu-tuning.json
rm -f "$TUNING"
[ "$RUN_LAB" = 0 ] || timeout 150 "$B/vulkan_lab" --model "$LAB" --types "$LAB_TYPES" --n "$LAB_N" --reps 10 --out "$TUNING" > "$OUT/lab.log" 2>&1
echo "exit $?"
[ -f "$TUNING" ] && export SPLASH_VULKAN_TUNING=$TUNING && cp "$TUNING" "$OUT/tuning.json"
[ -f "$OUT/lab.log" ] && grep -E "vulkan_lab|NOT OK" "$OUT/lab.log" && echo "fastest launch per matrix:" &&
awk '/^  [a-z_]+ +(q4|q8|bf16) +[0-9]+ +(wg|tile)/{k=$1" "$2" "$3; if(!(k in b)||$5+0<b[k]){b[k]=$5+0; l[k]=$0}} END{for(k in l) print l[k]}' "$OUT/lab.log" | sort

stage "benchmarks (the whole models, weights of the real shapes; tables below)"
rm -f "$OUT/bench.jsonl"
for run in $RUNS; do
  for kv in $KVS; do
  IFS=: read -r s q gemv <<< "$run"; log="$OUT/bench-$s-$q${gemv:+-$(echo "$gemv" | tr -c 'A-Za-z0-9_.\n' -)}-$kv.log"
  envs=""; case "$gemv" in *=*) envs=$(echo "$gemv" | tr , ' ');; esac
  if [ "$(left)" -lt 60 ]; then echo "skipping $run $kv KV: out of time"; continue; fi
  prof=""; [ "${SPLASH_GPU_PROFILE:-}" = "$run" ] && prof="--profile"
  t=$(( $(left) < 200 ? $(left) : 200 ))
  env $envs SPLASH_VULKAN_INT_DOT=$([ "$gemv" = float ] && echo 0 || echo 1) timeout "$t" "$B/vulkan_bench" --shape "$s" --quant "$q" \
    --kv-type "$kv" --dir /tmp/splash-vulkan-bench --json "$OUT/bench.jsonl" $BENCH_ARGS $CHUNKS $ATTN $prof > "$log" 2>&1
  echo "$run $kv KV: exit $?"; grep -v "^  [a-z_]* .*%$" "$log" | grep -v "^splash vulkan profile\|^  op " | head -30
  [ -n "$prof" ] && grep -A25 "^splash vulkan profile" "$log" | head -28
  done
done
stage "done"
