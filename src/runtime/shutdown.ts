// One shutdown coordinator for every controller in the process: the first SIGTERM/SIGINT stops
// intake (watches, queues) and gives running work a grace period to finish; a second signal
// exits at once with a failure status (controller-runtime's behaviour).

export interface ShutdownOptions {
  readonly graceMs: number;
  readonly signals?: readonly NodeJS.Signals[];
  /** Called on the second signal; default: process.exit. */
  readonly exit?: (code: number) => void;
  readonly onSignal?: (signal: NodeJS.Signals, first: boolean) => void;
  /**
   * A provisional handler that covered the signals until now; removed only after this one is
   * registered, since removing a process's last listener drops a signal that is still pending.
   */
  readonly replaces?: ((signal: NodeJS.Signals) => void) | undefined;
}

export class Shutdown {
  readonly #intake = new AbortController();
  readonly #options: ShutdownOptions;
  readonly #signals: readonly NodeJS.Signals[];
  readonly #handler = (signal: NodeJS.Signals): void => this.#onSignal(signal);

  constructor(options: ShutdownOptions) {
    this.#options = options;
    this.#signals = options.signals ?? ['SIGTERM', 'SIGINT'];
    for (const signal of this.#signals) process.on(signal, this.#handler);
    if (options.replaces) for (const signal of this.#signals) process.off(signal, options.replaces);
  }

  /** Aborted when shutdown begins: stop taking in work. */
  get intake(): AbortSignal {
    return this.#intake.signal;
  }

  /** Begins shutdown without a signal (e.g. `--once` finished, or leadership was lost). */
  stop(reason = 'stop'): void {
    if (!this.#intake.signal.aborted) this.#intake.abort(reason);
  }

  /**
   * Waits for `work` (the controllers' run promises) to finish once intake has stopped, at most
   * the grace period. Returns false when the grace period ran out first.
   */
  async drain(work: Promise<unknown>): Promise<boolean> {
    // Settled here at once, so work that fails before shutdown is no unhandled rejection;
    // the caller watches `work` for failures itself.
    const finished = work.then(() => true, () => true);
    await new Promise<void>((resolve) => {
      if (this.#intake.signal.aborted) resolve();
      else this.#intake.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceOver = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#options.graceMs);
    });
    try {
      return await Promise.race([finished, graceOver]);
    } finally {
      clearTimeout(timer);
    }
  }

  dispose(): void {
    for (const signal of this.#signals) process.off(signal, this.#handler);
  }

  #onSignal(signal: NodeJS.Signals): void {
    const first = !this.#intake.signal.aborted;
    this.#options.onSignal?.(signal, first);
    if (first) this.#intake.abort(signal);
    else (this.#options.exit ?? ((code: number) => process.exit(code)))(1);
  }
}
