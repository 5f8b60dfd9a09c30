// When the admission policies of the config in force must be enforced: the grace windows of the
// "labels at create" invariant. After a change of what the policies must be (a reload, a
// namespace's labels), or of what they are (an operator deleting or editing one, labeller's rights
// on them revoked), labeller needs a moment to apply them again and the API server another to
// enforce what it applied (its policy source refreshes every second); a namespace's new labels
// reach the policies' namespaceObject through the API server's own cache. A create made while a
// change is under way or inside its window is not judged at its create (convergence judges it
// after). A change still pending during a disturbance (the writer stopped, killed or delayed, the
// API server restarted, a shard member joining or leaving) waits for its end, and for a writer to
// take over. A window is an upper bound: it closes early once the change is seen enforced, when the
// harness's dry-run creates in every namespace carry what the policies set, made long enough after
// the change for the change itself to be enforced (an edit by hand is not at once). From then on
// every create is judged: the policies must not go back.

/** How long each kind of change may take to be enforced, in ms. */
export interface Graces {
  /** A live reload: the file change seen (at once; polled every 5 s at worst), the policies applied, enforced. */
  readonly reloadMs: number;
  /** A policy deleted or edited by hand, or the rights given back: put back at the next resync (--requeue-after, ±10 %), enforced. */
  readonly resyncMs: number;
  /** A namespace's labels changed: the API server's cache of namespaces. */
  readonly namespaceMs: number;
  /** After a disturbance: the lease lapses, another replica leads (or the bucket moves) and applies, enforced. */
  readonly takeoverMs: number;
  /** How long the API server may take to enforce any change of the policies (an edit by hand too): a create sooner may show what was. */
  readonly enforcedMs: number;
}

/** What changed: the config (a reload), a policy behind labeller's back, or one namespace's labels. */
export type Change = 'reload' | 'tamper' | 'namespace';

export class PolicyWindows {
  readonly #graces: Graces;
  /** Creates made from then on are judged (but in a namespace whose labels changed since). */
  #settledAt = 0;
  readonly #namespaces = new Map<string, number>();
  /** Changes under way: nothing is judged meanwhile, as what they change may already be enforced. */
  #changing = 0;
  /** Disturbances under way: while one is, a pending change may not be applied. */
  #disturbing = 0;
  /** Whether labeller may not write its policies now: nothing is judged until it may again, and resyncs. */
  #revoked = false;
  /** Since when a change is pending (its window open, not seen enforced); undefined: none is. */
  #pendingSince: number | undefined;

  constructor(graces: Graces) {
    this.#graces = graces;
  }

  /** The replicas started at `at`: the first to lead applies the policies, as after a reload. */
  started(at = Date.now()): void {
    this.#open(at + this.#graces.reloadMs);
  }

  /**
   * Makes `change` (of `namespace`'s labels, for a namespace change), then opens its window. The
   * world the oracle reads changes within, so a create answered meanwhile is not judged.
   */
  async change(change: Change, make: () => unknown, namespace?: string): Promise<void> {
    this.#changing++;
    try {
      await make();
    } finally {
      this.#changing--;
      const now = Date.now();
      if (change === 'namespace') {
        const until = now + this.#graces.namespaceMs;
        this.#namespaces.set(namespace!, Math.max(this.#namespaces.get(namespace!) ?? 0, until));
      } else this.#open(now + (change === 'reload' ? this.#graces.reloadMs : this.#graces.resyncMs));
    }
  }

  /**
   * The dry-run creates of one round, one per namespace, the first made at `at`, all carried what
   * the policies set (`right`): a change that ended long enough before is enforced, and its
   * window closes.
   */
  observed(right: boolean, at: number): void {
    if (!right || this.#changing > 0 || this.#revoked || this.#pendingSince === undefined) return;
    if (at < this.#pendingSince + this.#graces.enforcedMs) return;
    this.#pendingSince = undefined;
    this.#settledAt = Math.min(this.#settledAt, at);
  }

  /** labeller's rights on its policies revoked (`true`) or given back. */
  revoked(revoked: boolean, at = Date.now()): void {
    this.#revoked = revoked;
    if (!revoked) this.#open(at + this.#graces.resyncMs);
  }

  /** Makes a disturbance: a change pending meanwhile waits for its end, and for a writer to take over. */
  async disturbance(make: () => Promise<void>): Promise<void> {
    this.#disturbing++;
    try {
      await make();
    } finally {
      this.#disturbing--;
      if (this.#pendingSince !== undefined) this.#open(Date.now() + this.#graces.takeoverMs);
    }
  }

  /**
   * Whether a create in `namespace` made at `at` (what the oracle wanted read then) must carry
   * what the policies set: asked once it is answered, so a change begun meanwhile counts.
   */
  settled(namespace: string, at: number): boolean {
    const pending = this.#pendingSince !== undefined;
    return !this.#revoked && this.#changing === 0 && !(this.#disturbing > 0 && pending) &&
      at >= this.#settledAt && at >= (this.#namespaces.get(namespace) ?? 0);
  }

  /** How long until every window closes (Infinity while the rights are revoked). */
  remainingMs(now = Date.now()): number {
    if (this.#revoked) return Infinity;
    return Math.max(0, this.#settledAt - now, ...[...this.#namespaces.values()].map((at) => at - now));
  }

  /** A window until `until`, for a change pending from now. */
  #open(until: number): void {
    this.#settledAt = Math.max(this.#settledAt, until);
    this.#pendingSince = Date.now();
  }
}
