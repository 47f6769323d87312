// `splash hermes [MODEL] [-- args…]`: see src/launch/hermes.ts.
import { hermes } from "../launch/hermes.ts";
import { launcherCommand } from "../launch/command.ts";

export default launcherCommand(hermes);
