// `splash stop [MODEL] [--all]`: end the servers that `splash <tool>` started and left running.
import { log } from "../log.ts";
import { modelKey } from "../launch/model.ts";
import { stopServer } from "../launch/server.ts";
import { allStates, readState } from "../launch/state.ts";
import { command, UsageError } from "./_command.ts";

export default command({
  meta: { name: "stop", description: "Stop the background server of a model started by a launcher (default: the embedded model's)" },
  args: {
    model: { type: "positional", required: false, description: "The model whose server to stop (as given to the launcher)" },
    all: { type: "boolean", description: "Stop every server started by a launcher" },
  },
  async run({ args }) {
    if (args.all && args.model !== undefined) throw new UsageError("give a MODEL or --all, not both", "stop");
    const states = args.all ? allStates() : [readState(modelKey(args.model))].filter((s) => s !== undefined);
    if (states.length === 0) {
      const running = allStates().map((s) => s.key);
      const what = args.all ? "no server started by a launcher is running" : `no server started by a launcher is running for ${modelKey(args.model)}`;
      log.info(running.length && !args.all ? `${what} (running: ${running.join(", ")}; \`splash stop --all\` stops them all)` : what);
      return;
    }
    for (const message of await Promise.all(states.map(stopServer))) log.info(message);
  },
});
