// One line of progress on stderr while a launcher waits (a server loading can take minutes). On a terminal it is a
// spinner redrawn in place; elsewhere (a pipe, a CI log) the first text and the outcome are printed once each.
const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export class Progress {
  private timer: ReturnType<typeof setInterval> | undefined;
  private text = "";
  private frame = 0;
  private readonly tty = process.stderr.isTTY === true;
  private readonly started = performance.now();

  constructor(text: string) {
    this.text = text;
    if (this.tty) {
      this.timer = setInterval(() => this.draw(), 100);
      this.draw();
    } else {
      console.error(`${text}…`);
    }
  }

  seconds(): number {
    return Math.round((performance.now() - this.started) / 1000);
  }

  update(text: string): void {
    this.text = text;
  }

  // Ends the spinner with a final line (✓ or ✗ on a terminal).
  done(text: string, ok = true): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty) process.stderr.write(`\r\x1b[K${ok ? "✓" : "✗"} ${text}\n`);
    else console.error(text);
  }

  private draw(): void {
    const width = process.stderr.columns ?? 80;
    const line = `${FRAMES[this.frame++ % FRAMES.length]} ${this.text}`;
    process.stderr.write(`\r\x1b[K${line.length > width - 1 ? `${line.slice(0, width - 2)}…` : line}`);
  }
}
