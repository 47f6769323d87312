// `splash qwen [MODEL] [-- args…]`: see src/launch/qwen.ts.
import { qwen } from "../launch/qwen.ts";
import { launcherCommand } from "../launch/command.ts";

export default launcherCommand(qwen);
