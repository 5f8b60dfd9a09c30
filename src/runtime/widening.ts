// A request to a running watcher that its shard selector has widened (a partition that grew):
// the watcher ends its watch, lists only what the wider selector adds, and watches on with the
// wider selector, so a member that takes ranges over lists its new share and not its whole cache
// again (watcher.ts).
import type { Added } from './partition.ts';

/** Asks a running watcher to widen; the watcher takes what was asked. */
export class Widening {
  #added: Added[] = [];
  #interrupt = new AbortController();

  /** Asks for a widening by `added`. */
  request(added: Added): void {
    this.#added.push(added);
    this.#interrupt.abort();
  }

  /** Whether a widening waits to be taken. */
  get pending(): boolean {
    return this.#added.length > 0;
  }

  /** Aborts when a widening is asked (a fresh signal after each take). */
  get signal(): AbortSignal {
    return this.#interrupt.signal;
  }

  /**
   * Takes what the widenings asked since the last take added, as one: their selectors joined
   * with `||` (as shardRange() terms are; none when one of them has none), any of their objects;
   * undefined when none was asked.
   */
  take(): Added | undefined {
    const added = this.#added;
    if (added.length === 0) return undefined;
    this.#added = [];
    this.#interrupt = new AbortController();
    if (added.length === 1) return added[0];
    const selectors = added.map((a) => a.selector);
    return {
      adds: (meta) => added.some((a) => a.adds(meta)),
      selector: selectors.every((s) => s !== undefined) ? selectors.join(' || ') : undefined,
    };
  }
}
