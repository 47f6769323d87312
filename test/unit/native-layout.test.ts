// The binding's struct layouts (src/native/layout.ts) against offsetof() as the C compiler lays the ABI structs out
// (native/tests/abi_layout.c, built with the library).
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { flatten, LAYOUTS } from "../../src/native/layout.ts";

const exe = join(import.meta.dir, "../../build/tests/abi_layout");

test("every ABI struct field sits where the C compiler puts it", async () => {
  expect(existsSync(exe)).toBe(true);
  const c = JSON.parse(await new Response(Bun.spawn([exe]).stdout).text()) as Record<
    string,
    { size: number; fields: Record<string, number> }
  >;
  for (const layout of LAYOUTS) {
    const native = c[layout.name];
    expect(native, layout.name).toBeDefined();
    const ours = Object.fromEntries(flatten(layout).map((f) => [f.name, f.offset]));
    expect({ size: layout.size, fields: ours }).toEqual({ size: native!.size, fields: native!.fields });
  }
});
