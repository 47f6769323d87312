// `splash claude [MODEL] [-- args…]`: see src/launch/claude.ts.
import { claude } from "../launch/claude.ts";
import { launcherCommand } from "../launch/command.ts";

export default launcherCommand(claude);
