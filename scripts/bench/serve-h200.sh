#!/usr/bin/env bash
# The serving path on one NVIDIA H200 (the device tool's nvidia-h200), through `splash serve --backend vulkan` and the
# HTTP API, with no Bun there: a compiled splash binary (scripts/build/binary.ts: the code, libsplash and the embedded
# splash-tiny with its drafters) is carried xz-compressed and unpacked with Python, which also runs the clients:
#   ttft-prefix.py       time to first token, prefix-cache hit against miss, 8K-token shared prefix
#   draft-throughput.py  tokens/s with and without each drafter (MTP, DFlash, DFlash2), 1 and 4 streams
#
#   here:   bun scripts/build/binary.ts --outfile dist/splash && xz --x86 --lzma2=preset=9e -T1 -c dist/splash > dist/splash.xz
#   carry:  .gl (the Vulkan loader packages, as gpu-h200.sh says) and dist/splash.xz
#   run:    bash scripts/bench/serve-h200.sh
#   output: the tables on stdout; logs (the servers' too) in $OUT (or /tmp/splash-gpu-out)
#
# Locally (lavapipe, short prompts, to try the script itself): SPLASH_GPU_SMOKE=1 SPLASH_BIN=/path/to/splash bash
# scripts/bench/serve-h200.sh
set -u
cd "$(dirname "$0")/../.."
. scripts/bench/gpu-common.sh
SMOKE=${SMOKE:-${SPLASH_GPU_SMOKE:-0}}

gpu_loader

stage "the splash binary"
BIN=${SPLASH_BIN:-/tmp/splash}
if [ ! -x "$BIN" ]; then
  [ -f dist/splash.xz ] || { echo "dist/splash.xz missing: build and compress it here, and carry it"; exit 1; }
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open("dist/splash.xz"), open(sys.argv[1], "wb"))' "$BIN"
  chmod +x "$BIN"
fi
"$BIN" --version

if [ "$SMOKE" = 1 ]; then
  TTFT_ARGS="--prefix-tokens 512 --trials 1"; DRAFT_ARGS="--requests 2 --max-tokens 16 --warmup 1"
else
  TTFT_ARGS="--prefix-tokens 8192 --trials 3"; DRAFT_ARGS="--requests 8 --max-tokens 128"
fi

stage "TTFT: prefix-cache hit against miss"
timeout 300 python3 scripts/bench/ttft-prefix.py --splash "$BIN" --backend vulkan --log "$OUT/ttft-server.log" $TTFT_ARGS \
  > "$OUT/ttft.log" 2>&1
echo "exit $?"; grep -m1 "^loaded" "$OUT/ttft-server.log"; cat "$OUT/ttft.log"

stage "tokens/s with and without each drafter, 1 and 4 streams"
timeout 400 python3 scripts/bench/draft-throughput.py --splash "$BIN" --backend vulkan --log "$OUT/draft-server.log" $DRAFT_ARGS \
  > "$OUT/draft.log" 2>&1
echo "exit $?"; cat "$OUT/draft.log"
stage "done"
