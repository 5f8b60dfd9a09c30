// A credential that goes stale (a token file, an exec plugin's token or certificate): loaded
// again when its time is up, or at once when the API server rejected it, one load at a time
// however many requests wait (client-go's exec authenticator and cached token source do the same).

export interface Fresh<T> {
  readonly value: T;
  /** Epoch ms after which the value is loaded again before use. */
  readonly freshUntil: number;
}

export class Refreshing<T> {
  readonly #load: (previous: T | undefined) => Promise<Fresh<T>>;
  readonly #now: () => number;
  #value: T | undefined;
  #freshUntil = -Infinity;
  #loading: Promise<T> | undefined;

  /** `load` gets the previous value, so a source can keep it when reloading fails for a moment. */
  constructor(load: (previous: T | undefined) => Promise<Fresh<T>>, now: () => number = Date.now) {
    this.#load = load;
    this.#now = now;
  }

  /** The current value, loaded first if it is missing or stale. */
  get(): Promise<T> {
    return this.#value !== undefined && this.#now() < this.#freshUntil ? Promise.resolve(this.#value) : this.#reload();
  }

  /** The current value if it is loaded and fresh, else undefined (get() loads it). */
  peek(): T | undefined {
    return this.#now() < this.#freshUntil ? this.#value : undefined;
  }

  /** `rejected` was refused by the server: load anew, unless another caller already replaced it. */
  refresh(rejected: T): Promise<T> {
    if (this.#value !== undefined && this.#value !== rejected) return Promise.resolve(this.#value);
    return this.#reload();
  }

  #reload(): Promise<T> {
    this.#loading ??= this.#load(this.#value)
      .then(({ value, freshUntil }) => {
        this.#value = value;
        this.#freshUntil = freshUntil;
        return value;
      })
      .finally(() => {
        this.#loading = undefined;
      });
    return this.#loading;
  }
}
