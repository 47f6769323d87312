// `splash opencode [MODEL] [-- args…]`: see src/launch/opencode.ts.
import { opencode } from "../launch/opencode.ts";
import { launcherCommand } from "../launch/command.ts";

export default launcherCommand(opencode);
