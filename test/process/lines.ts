// A child process's output, line by line, and waiting for a line: what the labeller runner and
// the fault tests' watch printer need.

/** A chunk handler that calls `onLine` with every complete line; a partial line waits for the rest. */
export function lineSplitter(onLine: (line: string) => void): (chunk: string) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) onLine(line);
  };
}

/** Items that arrive over time (log lines, printed events), and waits for one of them. */
export class Arrivals<T> {
  readonly items: T[] = [];
  readonly #wakers = new Set<() => void>();
  /** Why no more items will come, once that is so. */
  #ended: string | undefined;

  push(item: T): void {
    this.items.push(item);
    for (const wake of this.#wakers) wake();
  }

  /** No more items will come (`why`, e.g. "labeller exited (1)"): pending waits fail. */
  end(why: string): void {
    this.#ended = why;
    for (const wake of this.#wakers) wake();
  }

  /**
   * The first item at index ≥ `from` matching `predicate`. Rejects after `timeoutMs`, or when the
   * source ends first, with `context()` (a stderr tail, what did arrive) in the message.
   */
  waitFor(
    predicate: (item: T) => boolean,
    options: { readonly timeoutMs: number; readonly from?: number; readonly context: () => string },
  ): Promise<T> {
    return new Promise((resolve, reject) => {
      let scanned = options.from ?? 0;
      const check = (): void => {
        for (; scanned < this.items.length; scanned++) {
          const item = this.items[scanned]!;
          if (predicate(item)) return done(() => resolve(item));
        }
        if (this.#ended !== undefined) {
          done(() => reject(new Error(`${this.#ended} before the expected line\n${options.context()}`)));
        }
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`no matching line within ${options.timeoutMs} ms\n${options.context()}`))),
        options.timeoutMs,
      );
      const done = (settle: () => void): void => {
        clearTimeout(timer);
        this.#wakers.delete(check);
        settle();
      };
      this.#wakers.add(check);
      check();
    });
  }
}
