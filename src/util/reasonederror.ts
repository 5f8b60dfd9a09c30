// An error that says why in two ways: a message for people, and a reason code for the code that
// handles it, so that no caller has to match message text.

export class ReasonedError<Reason extends string> extends Error {
  readonly reason: Reason;

  constructor(reason: Reason, message: string) {
    super(message);
    this.reason = reason;
  }
}
