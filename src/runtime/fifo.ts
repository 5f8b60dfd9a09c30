/** A first-in, first-out queue whose shift is amortised O(1); Array#shift is O(n). */
export class Fifo<T> {
  readonly #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head++];
    // Drop the consumed prefix once it is at least half the array, so each item is moved
    // a bounded number of times on average.
    if (this.#head * 2 >= this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items.length = 0;
    this.#head = 0;
  }
}
