// Fights over a key. Under `conflicts: force` labeller takes back a key another field manager
// set to another value; that is right once (someone ran kubectl label by hand), and wrong when
// the other manager takes it back every time (a GitOps tool with self-heal that forces its own
// value): the two would write in turns for ever. So each key labeller retakes on an object is
// counted: retaken FIGHT_RETAKES times within FIGHT_WINDOW_MS, the key is a fight, and labeller
// yields it (leaves it to the other manager) for a backoff, 1 minute doubling up to an hour. When
// the backoff is over it retakes the key once; taken back again, it yields for twice as long. A
// key left alone for a window is forgotten. Keyed by the object's uid, so a new object of the
// same name starts afresh.

/** Retakes within the window that make a fight. */
export const FIGHT_RETAKES = 3;
export const FIGHT_WINDOW_MS = 10 * 60_000;
export const FIGHT_BACKOFF_MS = 60_000;
export const FIGHT_BACKOFF_MAX_MS = 60 * 60_000;

/** What to do with a contested key now. */
export type Contest =
  | { readonly verdict: 'retake' }
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
  readonly #now: () => number;
  #calls = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Keys yielded or being counted now. */
  get size(): number {
    return this.#fights.size;
  }

  /** A key labeller wants on object `uid` is set to another value by another manager: retake it, or yield it. */
  contest(uid: string, key: string): Contest {
    const now = this.#now();
    if (++this.#calls % 256 === 0) this.#prune(now);
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

  /** Whether the key is yielded now, in a backoff (asks without counting, as the status of a plan does). */
  yielded(uid: string, key: string): boolean {
    const fight = this.#fights.get(`${uid}\n${key}`);
    return fight !== undefined && this.#now() < fight.untilMs;
  }

  /** Forgets what has been quiet for a window past its backoff. */
  #prune(now: number): void {
    for (const [id, fight] of this.#fights) {
      if (now - fight.lastMs > FIGHT_WINDOW_MS + fight.backoffMs) this.#fights.delete(id);
    }
  }
}
