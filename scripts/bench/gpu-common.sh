# What the H200 scripts (gpu-h200.sh, gpu-prefill-h200.sh) share, sourced by both: the Vulkan loader and the gcc
# build of libsplash's C sources with the Vulkan backend (no Bun on the device machine: the SPIR-V kernels come
# prebuilt in build/gen, made by `bun scripts/build/native.ts` and carried).
#   gpu_loader                 unpacks the carried .gl packages and points the loader at NVIDIA's driver
#   gpu_build PROGRAM...       builds the library objects into $B/obj (unless built there from the same sources) and
#                              links each native/PROGRAM.c into $B
# The ISA flags per file suffix are scripts/build/native.ts's (isaFlags).
# Sets T0 (the start), OUT (logs: $OUT on the device machine, else /tmp/splash-gpu-out), B (the build folder) and
# stage(). gpu_loader needs SMOKE (1: lavapipe here, nothing unpacked).

T0=$(date +%s)
OUT=${OUT:-/tmp/splash-gpu-out}
mkdir -p "$OUT"
B=${SPLASH_GPU_BUILD:-/tmp/splash-gpu-build}  # one per checkout where several build at once
stage() { echo; echo "== $1 ($(( $(date +%s) - T0 )) s)"; }

gpu_loader() {
  stage "Vulkan loader"
  if [ -d .gl ] && ls .gl/*.deb >/dev/null 2>&1 && [ "$SMOKE" != 1 ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && \
     ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export VK_ICD_FILENAMES=$VK_DRIVER_FILES
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  fi
  ldconfig -p | grep -m1 libvulkan.so.1 || echo "no libvulkan.so.1 (carry .gl)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null
}

gpu_build() {
  stage "build (gcc, $(nproc) cores)"
  if [ ! -f build/gen/vulkan_kernels.c ]; then echo "build/gen/vulkan_kernels.c missing: run bun scripts/build/native.ts here and carry build/gen"; exit 1; fi
  CC=${CC:-cc}
  CFLAGS="-std=c11 -O3 -DNDEBUG -fPIC -pthread -fvisibility=hidden -w -D_GNU_SOURCE -DSPLASH_BUILD -DSPLASH_HAVE_VULKAN \
   -DSPLASH_VERSION_STRING=\"gpu-bench\" -Inative/include -Inative -Ibuild/gen"
  export CC CFLAGS B
  # the library's objects are kept for the next script of the same call while the sources are the same
  local stamp
  stamp=$(cat $(find native -name '*.[ch]' | sort) build/gen/vulkan_kernels.c build/gen/gpu_kernels.c | md5sum | cut -c1-32)
  if [ "$(cat "$B/obj/stamp" 2>/dev/null)" = "$stamp" ]; then echo "library objects of these sources already built"
  else
  rm -rf "$B"; mkdir -p "$B/obj"
  { find native -name '*.c' -not -path 'native/tests/*' -not -path 'native/tools/*' -not -path 'native/backends/metal/*' \
      -not -name '*_neon.c'; echo build/gen/vulkan_kernels.c; echo build/gen/gpu_kernels.c; } |
    xargs -P "$(nproc)" -I{} sh -c 'f={}; o="$B/obj/$(echo "$f" | tr / _).o"; x=""; case "$f" in
        *_avx2.c) x="-mavx2 -mfma -mf16c";; *_avxvnni.c) x="-mavx2 -mfma -mf16c -mavxvnni";; *_avx512.c) x="-mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c";; esac;
        $CC $CFLAGS $x -c "$f" -o "$o" || echo "FAILED $f"' 2>&1 | tee "$OUT/build.log"
  echo "$stamp" > "$B/obj/stamp"
  fi
  for p in "$@"; do
    $CC $CFLAGS -o "$B/$(basename "$p")" "native/$p.c" "$B"/obj/*.o -lm -ldl -pthread 2>&1 | tee -a "$OUT/build.log"
  done
  for p in "$@"; do [ -x "$B/$(basename "$p")" ] || { echo "$p did not build (build.log)"; exit 1; }; done
}
