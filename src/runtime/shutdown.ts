// One shutdown coordinator for every controller in the process: the first SIGTERM/SIGINT stops
// intake (watches, queues) and gives running work a grace period to finish; a second signal
// exits at once with a failure status (controller-runtime's behaviour). The entry point creates
// it before anything else, so a signal at any stage of startup is a clean stop.
import { aborted } from '../util/aborted.ts';

export interface ShutdownOptions {
  readonly signals?: readonly NodeJS.Signals[];
  /** Called on the second signal; default: process.exit. */
  readonly exit?: (code: number) => void;
}

export type SignalListener = (signal: NodeJS.Signals, first: boolean) => void;

export class Shutdown {
  readonly #intake = new AbortController();
  readonly #exit: (code: number) => void;
  readonly #signals: readonly NodeJS.Signals[];
  readonly #listeners = new Set<SignalListener>();
  readonly #handler = (signal: NodeJS.Signals): void => this.#onSignal(signal);

  constructor(options: ShutdownOptions = {}) {
    this.#exit = options.exit ?? ((code) => process.exit(code));
    this.#signals = options.signals ?? ['SIGTERM', 'SIGINT'];
    for (const signal of this.#signals) process.on(signal, this.#handler);
  }

  /** Aborted when shutdown begins: stop taking in work. */
  get intake(): AbortSignal {
    return this.#intake.signal;
  }

  /** Tells `listener` of each signal (to log it); returns the unsubscribe function. */
  onSignal(listener: SignalListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Begins shutdown without a signal (e.g. `--once` finished, or leadership was lost). */
  stop(reason = 'stop'): void {
    if (!this.#intake.signal.aborted) this.#intake.abort(reason);
  }

  /**
   * Waits for `work` (the controllers' run promises) to finish once intake has stopped, at most
   * `graceMs`. Returns false when the grace period ran out first.
   */
  async drain(work: Promise<unknown>, graceMs: number): Promise<boolean> {
    // Settled here at once, so work that fails before shutdown is no unhandled rejection;
    // the caller watches `work` for failures itself.
    const finished = work.then(() => true, () => true);
    await aborted(this.#intake.signal);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceOver = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), graceMs);
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
    for (const listener of this.#listeners) listener(signal, first);
    if (first) this.#intake.abort(signal);
    else this.#exit(1);
  }
}
