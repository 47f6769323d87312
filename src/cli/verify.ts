// `splash verify MODEL [--format F]`: the full check of a downloaded model: every file hashed against the sha256
// (or git blob sha1) the hub recorded for it, after the fast header and size check that every load runs.
import { z } from "zod";
import { formatBytes } from "../format.ts";
import { join } from "node:path";
import { checkWeightFiles, verifyChecksums, type FileCheck } from "../models/files.ts";
import { PACKED_FILE, readPackedHeader, verifyPacked } from "../models/packed.ts";
import { resolveModel } from "../models/resolve.ts";
import { FORMATS } from "../models/spec.ts";
import { CliError, command, parseOption } from "./_command.ts";

export default command({
  meta: { name: "verify", description: "Check every file of a downloaded model against the hub's checksums" },
  args: {
    model: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or omitted for the embedded model" },
    format: { type: "string", description: `Which downloaded format to check: ${FORMATS.join(", ")} (default: the first one downloaded)` },
    json: { type: "boolean", description: "Print the result as JSON" },
  },
  async run({ args }) {
    const format = args.format === undefined ? undefined : parseOption("verify", "format", z.enum(FORMATS, { error: `expected one of ${FORMATS.join(", ")}` }), args.format);
    const model = resolveModel(args.model, { format, anyFormat: true });
    const dirs = [model.dir, ...(model.kind === "hub" && model.drafterDir ? [model.drafterDir] : [])];
    const checks: (FileCheck & { dir: string })[] = [];
    if (model.packed) {
      // An imported model: the packed file's own checksum over every weight byte (the source's files are not here).
      const path = join(model.dir, PACKED_FILE);
      const header = readPackedHeader(path);
      if (!args.json) console.log(`${path}\n  header ok: ${header.tensors.length} tensors, ${formatBytes(header.fileBytes)}`);
      await verifyPacked(path);
      if (args.json) console.log(JSON.stringify({ model: model.id, dirs: [model.dir], ok: true, files: [{ path: PACKED_FILE, bytes: header.fileBytes, status: "ok", algorithm: "xxh64" }] }, null, 2));
      else console.log("the weights match their checksum (xxh64)");
      return;
    }
    for (const dir of dirs) {
      const weights = checkWeightFiles(dir);
      if (!args.json) console.log(`${dir}\n  headers and sizes ok: ${weights.tensors} tensors in ${weights.files.length} weight files`);
      verifyChecksums(dir, (c) => {
        checks.push({ ...c, dir });
        if (args.json) return;
        const status = c.status === "ok" ? "ok" : c.status === "mismatch" ? "MISMATCH" : "no hash";
        console.log(`  ${status.padEnd(8)} ${c.path}  ${formatBytes(c.bytes)}${c.algorithm ? `  ${c.algorithm}` : ""}`);
      });
    }
    const bad = checks.filter((c) => c.status === "mismatch");
    const unchecked = checks.filter((c) => c.status === "unchecked").length;
    if (args.json) console.log(JSON.stringify({ model: model.id, dirs, ok: bad.length === 0, files: checks }, null, 2));
    else console.log(`${checks.length - bad.length - unchecked} files match their checksums${unchecked ? `, ${unchecked} have no recorded hash (not a hub-cache snapshot)` : ""}${bad.length ? `, ${bad.length} do not` : ""}`);
    if (bad.length > 0) {
      const blobs = bad.map((c) => c.blob).join(" ");
      throw new CliError(`${bad.length} file(s) of ${model.id} do not match the hub's checksums: ${bad.map((c) => c.path).join(", ")}`, `delete the damaged blobs (rm ${blobs}) and run \`splash pull ${model.id}\` to download them again`);
    }
  },
});
