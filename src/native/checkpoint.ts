// The files of a checkpoint directory as libsplash finds and checks them (splash_checkpoint_*, native/api/
// checkpoint.c): which files, whether each is inside the directory, whether headers and index agree. One
// definition, the loader's, so what `splash models` and `splash verify` call complete is what `serve` loads.
import { CString, type Pointer } from "bun:ffi";
import { check } from "./errors.ts";
import { native } from "./library.ts";

export type CheckpointFiles = { files: { name: string; bytes: number }[]; tensors: number };

// Throws NativeError (naming the file, and the index entry where one names it) when the checkpoint is refused.
export function checkpointFiles(dir: string): CheckpointFiles {
  const lib = native();
  const out = new BigUint64Array(1);
  check(lib, "splash_checkpoint_open", lib.splash_checkpoint_open(Buffer.from(`${dir}\0`), out));
  const handle = Number(out[0]) as Pointer;
  try {
    const files: CheckpointFiles["files"] = [];
    const bytes = new BigUint64Array(1);
    for (let i = 0; ; i++) {
      const name = lib.splash_checkpoint_file(handle, i, bytes);
      if (!name) break;
      files.push({ name: new CString(name).toString(), bytes: Number(bytes[0]) });
    }
    return { files, tensors: Number(lib.splash_checkpoint_tensor_count(handle)) };
  } finally {
    lib.splash_checkpoint_close(handle);
  }
}
