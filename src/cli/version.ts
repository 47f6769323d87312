// `splash version` (also `splash --version`): the version of this build, alone on a line, for scripts.
import pkg from "../../package.json" with { type: "json" };
import { command } from "./_command.ts";

export default command({
  meta: { name: "version", description: "Print the version of Splash" },
  run() {
    console.log(pkg.version);
  },
});
