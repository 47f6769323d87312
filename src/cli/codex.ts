// `splash codex [MODEL] [-- args…]`: see src/launch/codex.ts.
import { codex } from "../launch/codex.ts";
import { launcherCommand } from "../launch/command.ts";

export default launcherCommand(codex);
