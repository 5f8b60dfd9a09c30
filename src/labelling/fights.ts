// Fights over a key. A key labeller takes over (`conflicts: force`, or protected) may be set to
// another value by another field manager. Who it is decides what labeller does:
//
// - A manager the config yields to (`fights.yieldTo`: GitOps controllers by default, whose
//   self-heal forces their own value back at once): the two would write in turns for ever. So
//   each key labeller retakes on an object is counted: retaken FIGHT_RETAKES times within
//   FIGHT_WINDOW_MS, the key is a fight, and labeller yields it for a backoff, 1 minute doubling up
//   to an hour. When the backoff is over it retakes the key once; taken back again, it yields for
//   twice as long. A key left alone for a window is forgotten.
// - Anyone else (a tenant's kubectl label, a script): labeller puts its value back every time, so
//   flipping a label cannot wear it down. Only the rate is bounded: at most RETAKES_PER_MINUTE
//   retakes of an object's keys in any minute, the rest waiting until the minute allows.
//
// A field manager's name is chosen by the client (`kubectl --field-manager argocd-controller`), so
// a tenant can pass for a GitOps controller and be yielded to: the protection (config/protect.ts),
// which sees the identity the API server authenticated, is what keeps a key from a tenant.
// Keyed by the object's uid, so a new object of the same name starts afresh.

/** The field managers yielded to by default: the GitOps controllers' (Argo CD's server-side apply, Flux's). */
export const DEFAULT_YIELD_TO: readonly string[] = ['argocd-controller', 'kustomize-controller', 'helm-controller'];

/**
 * Retakes of one object's keys from managers not yielded to, in any minute: one every 3 s at
 * most, so another value lasts no longer than that while its writer keeps flipping it, and a
 * flipping tenant costs a bounded number of requests per object (each retake is a dry run naming
 * the manager, and an apply).
 */
export const RETAKES_PER_MINUTE = 20;
const MINUTE_MS = 60_000;

/** Retakes within the window that make a fight. */
export const FIGHT_RETAKES = 3;
export const FIGHT_WINDOW_MS = 10 * 60_000;
export const FIGHT_BACKOFF_MS = 60_000;
export const FIGHT_BACKOFF_MAX_MS = 60 * 60_000;

/** What to do with a contested key now. */
export type Contest =
  | { readonly verdict: 'retake' }
  /** Retaken too often this minute (from a manager not yielded to): looked at again at `untilMs`. */
  | { readonly verdict: 'wait'; readonly untilMs: number }
  /** Left to the other manager until `untilMs`; `started`: it has just become a fight (or one retake after a backoff was lost again). */
  | { readonly verdict: 'yield'; readonly untilMs: number; readonly started: boolean; readonly retakes: number };

interface Fight {
  /** When labeller retook the key, within the window. */
  retakes: number[];
  /** The current backoff (0: not a fight yet). */
  backoffMs: number;
  /** Yielded until then. */
  untilMs: number;
  /** Retaken once after the last backoff ended. */
  retookAfterBackoff: boolean;
  lastMs: number;
}

export class FightTracker {
  readonly #fights = new Map<string, Fight>();
  /** When keys of each object (by uid) were last retaken from managers not yielded to, within a minute. */
  readonly #retakes = new Map<string, number[]>();
  readonly #now: () => number;
  #calls = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Keys yielded or being counted now, and objects whose retakes are. */
  get size(): number {
    return this.#fights.size + this.#retakes.size;
  }

  /**
   * A key labeller wants on object `uid` is set to another value by another manager: retake it,
   * or yield it (`yields`: the manager is one the config yields to), or wait.
   */
  contest(uid: string, key: string, yields: boolean): Contest {
    const now = this.#now();
    if (++this.#calls % 256 === 0) this.#prune(now);
    return yields ? this.#fight(uid, key, now) : this.#retake(uid, now);
  }

  /** Puts the value back, at most RETAKES_PER_MINUTE times a minute per object. */
  #retake(uid: string, now: number): Contest {
    const times = (this.#retakes.get(uid) ?? []).filter((at) => now - at < MINUTE_MS);
    if (times.length >= RETAKES_PER_MINUTE) {
      this.#retakes.set(uid, times);
      return { verdict: 'wait', untilMs: times[0]! + MINUTE_MS };
    }
    times.push(now);
    this.#retakes.set(uid, times);
    return { verdict: 'retake' };
  }

  /** Counts a retake from a manager yielded to; yields the key for a backoff once it is a fight. */
  #fight(uid: string, key: string, now: number): Contest {
    const id = `${uid}\n${key}`;
    let fight = this.#fights.get(id);
    if (fight && now - fight.lastMs > FIGHT_WINDOW_MS + fight.backoffMs) fight = undefined;
    fight ??= { retakes: [], backoffMs: 0, untilMs: 0, retookAfterBackoff: false, lastMs: now };
    this.#fights.set(id, fight);
    fight.lastMs = now;
    if (now < fight.untilMs) return { verdict: 'yield', untilMs: fight.untilMs, started: false, retakes: 0 };
    fight.retakes = fight.retakes.filter((at) => now - at <= FIGHT_WINDOW_MS);
    const lostAgain = fight.backoffMs > 0 && fight.retookAfterBackoff;
    if (lostAgain || fight.retakes.length >= FIGHT_RETAKES) {
      const retakes = fight.retakes.length;
      fight.backoffMs = fight.backoffMs === 0 ? FIGHT_BACKOFF_MS : Math.min(FIGHT_BACKOFF_MAX_MS, fight.backoffMs * 2);
      fight.untilMs = now + fight.backoffMs;
      fight.retakes = [];
      fight.retookAfterBackoff = false;
      return { verdict: 'yield', untilMs: fight.untilMs, started: true, retakes };
    }
    if (fight.backoffMs > 0) fight.retookAfterBackoff = true;
    fight.retakes.push(now);
    return { verdict: 'retake' };
  }

  /**
   * Until when the key is not to be retaken now, without counting anything: yielded in a backoff,
   * or its object's retakes spent for this minute. Undefined: it may be contested now.
   */
  blockedUntil(uid: string, key: string): number | undefined {
    const now = this.#now();
    const fight = this.#fights.get(`${uid}\n${key}`);
    if (fight !== undefined && now < fight.untilMs) return fight.untilMs;
    const times = (this.#retakes.get(uid) ?? []).filter((at) => now - at < MINUTE_MS);
    return times.length >= RETAKES_PER_MINUTE ? times[0]! + MINUTE_MS : undefined;
  }

  /** Whether the key is yielded now, in a backoff (asks without counting, as the status of a plan does). */
  yielded(uid: string, key: string): boolean {
    const fight = this.#fights.get(`${uid}\n${key}`);
    return fight !== undefined && this.#now() < fight.untilMs;
  }

  /** Forgets what has been quiet for a window past its backoff, and retakes over a minute old. */
  #prune(now: number): void {
    for (const [id, fight] of this.#fights) {
      if (now - fight.lastMs > FIGHT_WINDOW_MS + fight.backoffMs) this.#fights.delete(id);
    }
    for (const [uid, times] of this.#retakes) {
      if (times.every((at) => now - at >= MINUTE_MS)) this.#retakes.delete(uid);
    }
  }
}
