// Keys due at coarse deadlines: a timing wheel of one set of keys per slot (a second, say), and
// each key's slot. Per key that is a map entry and a set entry, where a heap of {key, deadline}
// entries costs an object, its boxed deadline, a map entry and a heap slot: about half the memory
// for what the work queue holds of every cached object (its periodic re-check, minutes away).
import { MinHeap } from './heap.ts';

export class TimingWheel {
  readonly #slotMs: number;
  /** Each key's slot: its deadline ÷ slotMs, rounded up (a small integer, stored unboxed). */
  readonly #slotOf = new Map<string, number>();
  /** The keys due in each slot that holds any. */
  readonly #keys = new Map<number, Set<string>>();
  /** Slots that held keys, earliest first; one emptied by delete stays until it is reached. */
  readonly #slots = new MinHeap<number>((a, b) => a < b);

  /** @param slotMs the resolution: a deadline is rounded up to the end of its slot. */
  constructor(slotMs: number) {
    this.#slotMs = slotMs;
  }

  /** When key is due (its slot's end), if it is in the wheel. */
  deadline(key: string): number | undefined {
    const slot = this.#slotOf.get(key);
    return slot === undefined ? undefined : slot * this.#slotMs;
  }

  /** Puts key in the slot of `at` (moving it if it was in another one); it is never due before `at`. */
  set(key: string, at: number): void {
    const slot = Math.ceil(at / this.#slotMs);
    if (this.#slotOf.get(key) === slot) return;
    this.delete(key);
    this.#slotOf.set(key, slot);
    const keys = this.#keys.get(slot);
    if (keys !== undefined) {
      keys.add(key);
      return;
    }
    this.#keys.set(slot, new Set([key]));
    this.#slots.push(slot);
  }

  /** Takes key out of the wheel. */
  delete(key: string): void {
    const slot = this.#slotOf.get(key);
    if (slot === undefined) return;
    this.#slotOf.delete(key);
    const keys = this.#keys.get(slot);
    keys?.delete(key);
    if (keys?.size === 0) this.#keys.delete(slot);
  }

  /** When the earliest key is due, if any. */
  next(): number | undefined {
    // Slots emptied by delete are dropped on the way.
    for (let slot = this.#slots.peek(); slot !== undefined; slot = this.#slots.peek()) {
      if (this.#keys.has(slot)) return slot * this.#slotMs;
      this.#slots.pop();
    }
    return undefined;
  }

  /** Takes out and returns every key due by `now`, earliest slot first. */
  due(now: number): string[] {
    const due: string[] = [];
    for (let slot = this.#slots.peek(); slot !== undefined && slot * this.#slotMs <= now; slot = this.#slots.peek()) {
      this.#slots.pop();
      const keys = this.#keys.get(slot);
      if (keys === undefined) continue;
      this.#keys.delete(slot);
      for (const key of keys) {
        this.#slotOf.delete(key);
        due.push(key);
      }
    }
    return due;
  }

  clear(): void {
    this.#slotOf.clear();
    this.#keys.clear();
    this.#slots.clear();
  }

  /** Keys in the wheel. */
  get size(): number {
    return this.#slotOf.size;
  }
}
