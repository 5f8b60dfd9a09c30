/** A binary min-heap: push and pop in O(log n), peek in O(1). Equal items pop in no set order. */
export class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #before: (a: T, b: T) => boolean;

  /** @param before whether a must pop before b. */
  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    this.#items.push(item);
    let i = this.#items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  pop(): T | undefined {
    const top = this.#items[0];
    const last = this.#items.pop();
    if (this.#items.length === 0 || last === undefined) return top;
    this.#items[0] = last;
    for (let i = 0;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < this.#items.length && this.#less(left, smallest)) smallest = left;
      if (right < this.#items.length && this.#less(right, smallest)) smallest = right;
      if (smallest === i) return top;
      this.#swap(i, smallest);
      i = smallest;
    }
  }

  clear(): void {
    this.#items.length = 0;
  }

  // Both helpers are only called with indexes inside the array.
  #less(i: number, j: number): boolean {
    return this.#before(this.#items[i] as T, this.#items[j] as T);
  }

  #swap(i: number, j: number): void {
    const item = this.#items[i] as T;
    this.#items[i] = this.#items[j] as T;
    this.#items[j] = item;
  }
}
