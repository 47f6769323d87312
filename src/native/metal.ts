// The Mac's GPU as the native library's Metal backend reports it (splash_metal_query), for `splash doctor` and the
// memory plan. null where the library has no Metal backend (Linux) or Metal finds no GPU.
import { getField, METAL_INFO, setField } from "./layout.ts";
import type { NativeLibrary } from "./library.ts";

export type MetalInfo = {
  appleFamily: number; // highest MTLGPUFamilyAppleN: 7 = M1, 8 = M2, 9 = M3/M4, 0 = none
  metal3: boolean;
  usable: boolean; // the Metal backend can run here (Metal 3, Apple family ≥ 7, unified memory)
  recommendedWorkingSet: number; // bytes (MTLDevice.recommendedMaxWorkingSetSize)
  maxBuffer: number; // bytes: the largest single allocation
  wiredLimit: number; // bytes (sysctl iogpu.wired_limit_mb); 0 = the system's default
};

export function metalInfo(lib: Pick<NativeLibrary, "splash_metal_query">): MetalInfo | null {
  const bytes = new Uint8Array(METAL_INFO.size);
  const view = new DataView(bytes.buffer);
  setField(view, METAL_INFO, "struct_size", METAL_INFO.size);
  if (lib.splash_metal_query(bytes) !== 0) return null;
  const f = (name: string) => getField(view, METAL_INFO, name);
  return {
    appleFamily: f("apple_family"),
    metal3: f("metal3") !== 0,
    usable: f("usable") !== 0,
    recommendedWorkingSet: f("recommended_working_set"),
    maxBuffer: f("max_buffer"),
    wiredLimit: f("wired_limit"),
  };
}
