// Bundled in place of `Intl.Segmenter` (scripts/build.ts). yargs and its help formatting
// (string-width) build segmenters as their modules load, and each one loads ICU's break-iterator
// data: about 2 MiB of RSS in every run of a controller that never formats help through them.
// This stand-in builds the real segmenter when it is first used.
const Segmenter = globalThis.Intl.Segmenter; // not `Intl.Segmenter`: the build replaces that name

export class LazySegmenter {
  readonly #args: ConstructorParameters<typeof Segmenter>;
  #real: Intl.Segmenter | undefined;

  constructor(...args: ConstructorParameters<typeof Segmenter>) {
    this.#args = args;
  }

  segment(input: string): Intl.Segments {
    return this.#segmenter().segment(input);
  }

  resolvedOptions(): Intl.ResolvedSegmenterOptions {
    return this.#segmenter().resolvedOptions();
  }

  #segmenter(): Intl.Segmenter {
    return (this.#real ??= new Segmenter(...this.#args));
  }
}
