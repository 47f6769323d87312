#!/usr/bin/env bash
# The serving path on one NVIDIA H200 (the device tool's nvidia-h200), through `splash serve --backend vulkan` and the
# HTTP API: the end-to-end speculation and prefix-cache figures. Python runs the clients:
#   ttft-prefix.py       time to first token, prefix-cache hit against miss, 8K-token shared prefix
#   draft-throughput.py  tokens/s with and without each drafter (MTP, DFlash, DFlash2), 1 and 4 streams
# The device machine has no Bun and no registry, and one call carries at most 64 MiB with the working tree (a compiled
# splash is ~60 MB compressed), so Bun and Splash's runtime packages travel in a call of their own while the tree is
# small, and stay on the warm machine (ignored paths a call leaves there are kept for the next call):
#
#   here:    bash scripts/bench/serve-h200.sh prepare   .serve-h200/payload.tar.xz (Bun + runtime packages, git-excluded)
#   call 1:  with the checkout sparse without models/splash-tiny (git sparse-checkout), carry .gl and .serve-h200
#            (prepare packs build/gen's kernels there too):  bash scripts/bench/serve-h200.sh install
#            (unpacks, builds libsplash with the Vulkan backend)
#   call 2:  right after (the machine stays warm 30 s), the whole checkout, carry .gl:
#            bash scripts/bench/serve-h200.sh run
#   output:  the tables on stdout; logs (the servers' too) in $OUT (or /tmp/splash-gpu-out)
#
# Locally (lavapipe, short prompts, the project's Bun and build/): SPLASH_GPU_SMOKE=1 bash scripts/bench/serve-h200.sh run
set -u
cd "$(dirname "$0")/../.."
STAGE=.serve-h200
# where call 1 leaves Bun and libsplash: outside the checkout, which the next call replaces
ROOT=/tmp/serve-h200
SMOKE=${SMOKE:-${SPLASH_GPU_SMOKE:-0}}

prepare() {
  grep -qx "/$STAGE/" .git/info/exclude 2>/dev/null || echo "/$STAGE/" >>.git/info/exclude
  rm -rf "$STAGE" && mkdir -p "$STAGE"
  local work
  work=$(mktemp -d)
  mkdir -p "$work/bin" "$work/node_modules"
  cp "$(readlink -f node_modules/.bin/bun)" "$work/bin/bun"
  # the packages `bun src/main.ts` imports at run time; the type-checker packages npm lists as peers stay behind
  npm ls --omit=dev --all --parseable 2>/dev/null | grep '/node_modules/' |
    grep -Ev '/node_modules/(typescript|@typescript/|bun-types|@types/)' | sort -u | while read -r p; do
    rel=${p#"$PWD/node_modules/"}
    mkdir -p "$work/node_modules/$(dirname "$rel")" && cp -a "$p" "$work/node_modules/$rel"
  done
  tar -C "$work" -cf - . | xz -T0 -6 >"$STAGE/payload.tar.xz"
  rm -rf "$work"
  # the kernels gpu_build compiles, and the module scripts/build/native.ts writes beside the library (src/ imports it)
  tar -cJf "$STAGE/gen.tar.xz" build/gen/vulkan_kernels.c build/gen/vulkan_kernels.h build/gen/gpu_kernels.c build/gen/gpu_kernels.h \
    build/native-lib.ts
  ls -la "$STAGE"
}

install() {
  . scripts/bench/gpu-common.sh
  gpu_loader
  stage "unpack Bun and the runtime packages"
  rm -rf "$ROOT" && mkdir -p "$ROOT" && tar -C "$ROOT" -xJf "$STAGE/payload.tar.xz"
  "$ROOT/bin/bun" --version
  tar -xJf "$STAGE/gen.tar.xz" && cp build/native-lib.ts "$ROOT/"
  gpu_build
  stage "link libsplash"
  $CC -shared -o "$ROOT/libsplash.so" "$B"/obj/*.o -lm -ldl -pthread && ls -la "$ROOT"
}

run() {
  . scripts/bench/gpu-common.sh
  gpu_loader
  local splash="bun src/main.ts"
  if [ "$SMOKE" != 1 ]; then
    splash="$ROOT/bin/bun src/main.ts"
    export SPLASH_LIB=$ROOT/libsplash.so
    ln -sfn "$ROOT/node_modules" node_modules
    # src/ imports the library through the module native.ts generated here (install kept it beside the library)
    mkdir -p build && cp "$ROOT/libsplash.so" "$ROOT/native-lib.ts" build/
  fi
  local ttft_args="--prefix-tokens 8192 --trials 2" draft_args="--requests 16 --max-tokens 256 --warmup 2"
  [ "$SMOKE" = 1 ] && ttft_args="--prefix-tokens 512 --trials 1" && draft_args="--requests 2 --max-tokens 16 --warmup 1"
  stage "TTFT: prefix-cache hit against miss"
  timeout 100 python3 scripts/bench/ttft-prefix.py --splash "$splash" --backend vulkan --log "$OUT/ttft-server.log" $ttft_args \
    >"$OUT/ttft.log" 2>&1
  echo "exit $?"; grep -m1 "^loaded" "$OUT/ttft-server.log"; cat "$OUT/ttft.log"
  stage "tokens/s with and without each drafter, 1 and 4 streams"
  timeout 170 python3 scripts/bench/draft-throughput.py --splash "$splash" --backend vulkan --log "$OUT/draft-server.log" \
    $draft_args >"$OUT/draft.log" 2>&1
  echo "exit $?"; cat "$OUT/draft.log"
  stage "done"
}

case "${1:-}" in
  prepare) prepare ;;
  install) install ;;
  run) run ;;
  *) echo "usage: $0 prepare|install|run" >&2; exit 2 ;;
esac
