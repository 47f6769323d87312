#!/usr/bin/env bash
# Compiles the cooperative-matrix lab's variants (native/tools/vulkan_coopmat_lab.comp probes and kernels/matmul_coopmat.comp
# tiles) to SPIR-V in DIR with the list native/tools/vulkan_coopmat_lab.c reads. Here, with glslang 13 (build/glslang, which
# `bun scripts/build/native.ts` installs): the device machine has no glslang, so DIR travels with the device call and
# gpu-prefill-h200.sh's `coopmat` stage runs the lab on it.
#
#   bash scripts/bench/coopmat-lab.sh DIR [all|product|flash|gemm]
# all (the default): every probe and the product kernel's tiles; product: the peak probes, the fastest staging probe
# and the product kernel's tiles, beside the kernel as committed at $GEMM_BASE if set (the check after a change to the
# kernel); flash: the flash attention kernel
# (kernels/flash_attention_coopmat.comp, head dim 256) on each KV type, at 0 and after 31K positions, beside the kernel as committed at git revision $FLASH_BASE if set (the comparison after a change).
# gemm: the product kernel's default tiles for prefill chunks and kernels/generate.ts' candidate, bf16 and q4.
set -eu
cd "$(dirname "$0")/../.."
DIR=${1:?usage: coopmat-lab.sh DIR [all|product]}
SET=${2:-all}
G=build/glslang/cmeel.prefix
GLSLANG=$(command -v glslangValidator || true)
if [ -x "$G/bin/glslangValidator" ]; then GLSLANG=$G/bin/glslangValidator; export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}; fi
mkdir -p "$DIR"
LIST=$DIR/list.txt
echo "# name file mode threads bm bn bk fm fn ty wt" > "$LIST"

# lab NAME MODE THREADS BM BN BK FM FN TY WT DEFINES...: one probe of vulkan_coopmat_lab.comp
lab() {
  local name=$1; shift
  local mode=$1 threads=$2 bm=$3 bn=$4 bk=$5 fm=$6 fn=$7 ty=$8 wt=$9; shift 9
  "$GLSLANG" -V --target-env vulkan1.2 -DMODE="$mode" "$@" -o "$DIR/$name.spv" native/tools/vulkan_coopmat_lab.comp > "$DIR/$name.log" ||
    { cat "$DIR/$name.log"; exit 1; }
  rm -f "$DIR/$name.log"
  echo "$name $name.spv $mode $threads $bm $bn $bk $fm $fn $ty $wt" >> "$LIST"
}
# product NAME WT(f16|bf16|q4) BM BN BK WM WN [FILE [DEFINES...]]: a tile of the product kernel (or of FILE, a
# candidate beside it), DEFINES (-DNAME=VALUE) its compile-time choices
product() {
  local name=$1 wt=$2 bm=$3 bn=$4 bk=$5 wm=$6 wn=$7 file=${8:-kernels/matmul_coopmat.comp} w=2
  shift 7; [ $# -gt 0 ] && shift
  [ "$wt" = bf16 ] && w=1
  [ "$wt" = q4 ] && w=4
  "$GLSLANG" -V --target-env vulkan1.2 -Ikernels -DSTAGE=1 -DWT=$w -DBM=$bm -DBN=$bn -DBK=$bk -DWM=$wm -DWN=$wn "$@" \
    -o "$DIR/$name.spv" "$file" > "$DIR/$name.log" || { cat "$DIR/$name.log"; exit 1; }
  rm -f "$DIR/$name.log"
  echo "$name $name.spv 3 $(( bm / wm * bn / wn * 32 )) $bm $bn $bk 0 0 0 $wt" >> "$LIST"
}

# flash NAME WARPS FILE KV PAST...: a variant of the flash attention kernel (FILE) at head dim 256 with WARPS subgroups of
# 16 query vectors, on KV rows of type KV (SPLASH_KV_*: 0 f32, 1 f16, 2 int8), once per PAST positions before the chunk
# (a chunk of the lab's --n rows: 1024 after 31744 ends at 32K)
flash() {
  local name=$1 warps=$2 file=$3 kv=$4; shift 4
  [ -f "$DIR/$name.spv" ] || { "$GLSLANG" -V --target-env vulkan1.2 -Ikernels -DD=256 -DWARPS=$warps -o "$DIR/$name.spv" "$file" > "$DIR/$name.log" ||
    { cat "$DIR/$name.log"; exit 1; }; }
  rm -f "$DIR/$name.log"
  for past in "$@"; do echo "${name}_kv${kv}_at$past $name.spv 4 $(( warps * 32 )) $(( warps * 16 )) $past 256 0 0 $kv -" >> "$LIST"; done
}
if [ "$SET" = flash ]; then
  K=kernels/flash_attention_coopmat.comp
  for kv in 0 1 2; do flash flash $(grep -m1 -o 'define WARPS [0-9]*' $K | cut -d' ' -f3) $K $kv 0 31744; done
  # where the time goes: the kernel without its global loads, without S = Q·Kᵀ, without P·V, and with the softmax's
  # lanes reading their scores in the same order (one bank) (f16 rows, at 32K)
  sed '/fetch(p\./d' $K > "$DIR/flash_noload.comp"
  sed '/s\[kb\] = coopMatMulAdd/d' $K > "$DIR/flash_noqk.comp"
  sed '/o\[db\] = coopMatMulAdd/d' $K > "$DIR/flash_nopv.comp"
  sed 's/((j + mine) \& (HALF_BC - 1u))/j/' $K > "$DIR/flash_samebank.comp"
  for v in noload noqk nopv samebank; do
    cmp -s $K "$DIR/flash_$v.comp" && { echo "flash_$v: the sed matched nothing"; exit 1; }
    flash flash_$v 8 "$DIR/flash_$v.comp" 1 31744
  done
  if [ -n "${FLASH_BASE:-}" ]; then  # the kernel as committed at FLASH_BASE, at FLASH_BASE_WARPS
    git show "$FLASH_BASE:$K" > "$DIR/flash_base.comp"
    for kv in ${FLASH_BASE_KV:-0 1}; do flash flash_base ${FLASH_BASE_WARPS:-4} "$DIR/flash_base.comp" $kv 0 31744; done
  fi
  lab peak_f16f32_4x4_t128 0 128 0 0 0 4 4 0 - -DTY=0 -DFM=4 -DFN=4
  echo "$(grep -vc '^#' "$LIST") variants in $LIST"; exit 0
fi

# gemm: the product kernel's default tiles for prefill chunks and its candidate (kernels/generate.ts) on bf16 and q4
# weights, for their driver statistics (registers, local memory) beside their time
if [ "$SET" = gemm ]; then
  for wt in bf16 q4; do
    product "product_${wt}_128x128x32_64x32" $wt 128 128 32 64 32
    product "product_${wt}_128x128x64_64x32" $wt 128 128 64 64 32
    product "product_${wt}_128x256x32_64x64" $wt 128 256 32 64 64
  done
  lab peak_f16f32_4x4_t128 0 128 0 0 0 4 4 0 - -DTY=0 -DFM=4 -DFN=4
  echo "$(grep -vc '^#' "$LIST") variants in $LIST"; exit 0
fi

# (d) the product kernel on f16, bf16 and q4 weights, on its tiles for prefill chunks, beside the kernel as committed at
# git revision $GEMM_BASE if set (on the tile its defaults pick for long chunks)
K=kernels/matmul_coopmat.comp
lab peak_f16f32_4x4_t128 0 128 0 0 0 4 4 0 - -DTY=0 -DFM=4 -DFN=4
for wt in f16 bf16 q4; do
  product "product_${wt}_128x128x64_64x32" $wt 128 128 64 64 32
  product "product_${wt}_128x128x32_64x64" $wt 128 128 32 64 64
  product "product_${wt}_128x128x32_64x32" $wt 128 128 32 64 32
  product "product_${wt}_256x128x32_64x64" $wt 256 128 32 64 64
  product "product_${wt}_128x256x32_64x64" $wt 128 256 32 64 64
  if [ -n "${GEMM_BASE:-}" ]; then
    git show "$GEMM_BASE:$K" > "$DIR/product_base.comp"
    product "base_${wt}_128x128x64_64x32" $wt 128 128 64 64 32 "$DIR/product_base.comp"
  fi
done
lab peak_s8s32_4x2_t128 0 128 0 0 0 4 2 2 - -DTY=2 -DFM=4 -DFN=2
lab staged_128x128x32_64x64_sh0 2 128 128 128 32 0 0 0 - -DBM=128 -DBN=128 -DBK=32 -DWM=64 -DWN=64 -DSH=0 -DDB=0
lab peak_f16f32_4x4_t128_again 0 128 0 0 0 4 4 0 - -DTY=0 -DFM=4 -DFN=4
if [ "$SET" = product ]; then echo "$(grep -vc '^#' "$LIST") variants in $LIST"; exit 0; fi

# (a) products only: accumulators per subgroup, workgroup size, operand types, arrays vs named accumulators
for t in 128 256; do
  for f in "1 1" "2 2" "4 2" "4 4"; do
    set -- $f
    lab "peak_f16f32_${1}x${2}_t$t" 0 $t 0 0 0 $1 $2 0 - -DTY=0 -DFM=$1 -DFN=$2
  done
done
lab peak_f16f32_2x2_named_t128 0 128 0 0 0 2 2 0 - -DTY=0 -DFM=2 -DFN=2 -DUNROLLED=1
lab peak_f16f16_2x2_t128 0 128 0 0 0 2 2 1 - -DTY=1 -DFM=2 -DFN=2
lab peak_f16f16_4x2_t128 0 128 0 0 0 4 2 1 - -DTY=1 -DFM=4 -DFN=2
lab peak_s8s32_2x2_t128 0 128 0 0 0 2 2 2 - -DTY=2 -DFM=2 -DFN=2
lab peak_s8s32_4x2_t128 0 128 0 0 0 4 2 2 - -DTY=2 -DFM=4 -DFN=2

# (b) + fragments from shared memory each step; (c) + global → shared staging (single, double buffered);
# tiles BM BN BK / WM WN and the shared arrays' element type
tile() {  # tile BM BN BK WM WN: every probe of one tile shape
  local bm=$1 bn=$2 bk=$3 wm=$4 wn=$5 th=$(( $1 / $4 * $2 / $5 * 32 )) d="-DBM=$1 -DBN=$2 -DBK=$3 -DWM=$4 -DWN=$5"
  local n="${bm}x${bn}x${bk}_${wm}x${wn}"
  for sh in 0 2; do
    lab "shmem_${n}_sh$sh" 1 $th $bm $bn $bk 0 0 0 - $d -DSH=$sh
    lab "staged_${n}_sh$sh" 2 $th $bm $bn $bk 0 0 0 - $d -DSH=$sh -DDB=0
    [ $(( (bm + bn) * (bk + 8) * 4 )) -le 49152 ] && lab "staged_db_${n}_sh$sh" 2 $th $bm $bn $bk 0 0 0 - $d -DSH=$sh -DDB=1
  done
  lab "shmem_${n}_sh1" 1 $th $bm $bn $bk 0 0 0 - $d -DSH=1
}
tile 128 128 32 64 32
tile 128 128 32 64 64
tile 128 128 32 32 32
tile 128 128 64 64 32
tile 64 64 32 32 32
tile 128 64 32 64 32
tile 256 128 32 64 64

echo "$(grep -vc '^#' "$LIST") variants in $LIST"
