// A request to a running watcher that its shard selector has widened (a partition that grew):
// the watcher ends its watch, lists only what the wider selector adds at the version the watch
// reached, and watches on from that version, so a member that takes ranges over lists its new
// share and not its whole cache again (watcher.ts).
/** Asks a running watcher to widen; the watcher takes what was asked. */
export class Widening {
  /** The selectors of what the pending requests add; `null`: one of them cannot say (everything is listed). */
  #added: string[] | null | undefined;
  #interrupt = new AbortController();

  /**
   * Asks for a widening: `added` selects what it adds (a `shardSelector`); undefined when no
   * selector can say it (the stream is not filtered by the server: everything is listed, and the
   * caller keeps what it now keeps).
   */
  request(added: string | undefined): void {
    this.#added = added === undefined || this.#added === null ? null : [...(this.#added ?? []), added];
    this.#interrupt.abort();
  }

  /** Whether a widening waits to be taken. */
  get pending(): boolean {
    return this.#added !== undefined;
  }

  /** Aborts when a widening is asked (a fresh signal after each take). */
  get signal(): AbortSignal {
    return this.#interrupt.signal;
  }

  /**
   * Takes the widening asked since the last take: `added` is the selector of what it adds (the
   * requests' selectors joined with `||`, as shardRange() terms are), or undefined for everything;
   * undefined when none was asked.
   */
  take(): { readonly added: string | undefined } | undefined {
    const added = this.#added;
    if (added === undefined) return undefined;
    this.#added = undefined;
    this.#interrupt = new AbortController();
    return { added: added === null ? undefined : added.join(' || ') };
  }
}
