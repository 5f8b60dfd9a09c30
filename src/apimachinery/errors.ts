// Typed failures of API access. Callers branch on the class and `status`; the messages are
// written for the person running labeller.
import { UsageError } from '../util/usage.ts';

/** A Kubernetes `Status` object, as returned in error bodies and watch ERROR events. */
export interface Status {
  readonly kind?: string;
  readonly status?: string;
  readonly message?: string;
  readonly reason?: string;
  readonly code?: number;
  readonly details?: { readonly retryAfterSeconds?: number; readonly causes?: readonly StatusCause[] };
}

export interface StatusCause {
  readonly reason?: string;
  readonly message?: string;
  readonly field?: string;
}

/** The API server answered with an error status. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly reason: string;
  /** Seconds the server asked us to wait (429 and some 5xx), from Retry-After or the Status details. */
  readonly retryAfterSeconds: number | undefined;
  /** Field-level causes, e.g. one FieldManagerConflict per contested field of an apply. */
  readonly causes: readonly StatusCause[];

  constructor(
    method: string,
    path: string,
    status: number,
    body: Status | undefined,
    retryAfterHeader?: string | null,
  ) {
    const reason = body?.reason ?? '';
    super(`${method} ${path}: ${status}${reason ? ` ${reason}` : ''}: ${body?.message ?? 'no message'}${hint(status)}`);
    this.status = status;
    this.reason = reason;
    this.causes = body?.details?.causes ?? [];
    const header = retryAfterHeader ? Number(retryAfterHeader) : NaN;
    this.retryAfterSeconds = Number.isFinite(header) ? header : body?.details?.retryAfterSeconds;
  }

  /** 410 Gone: the resourceVersion we asked for was compacted away. */
  get expired(): boolean {
    return this.status === 410;
  }
}

function hint(status: number): string {
  switch (status) {
    case 401:
      return ' (the credentials in the kubeconfig were rejected: refresh them or pick another --context)';
    case 403:
      return " (grant this identity list/watch/patch on the resource, e.g. with the Helm chart's RBAC)";
    case 429:
      return ' (the API server is throttling us; labeller backs off)';
    default:
      return '';
  }
}

/** Whether `error` is the API server's answer `status`. */
function answered(error: unknown, status: number): error is ApiError {
  return error instanceof ApiError && error.status === status;
}

export const isUnauthorized = (error: unknown): error is ApiError => answered(error, 401);
export const isForbidden = (error: unknown): error is ApiError => answered(error, 403);
export const isNotFound = (error: unknown): error is ApiError => answered(error, 404);
export const isConflict = (error: unknown): error is ApiError => answered(error, 409);

/** The API server could not be reached at all (DNS, refused connection, TLS, timeout). */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError';

  constructor(server: string, cause: unknown) {
    super(
      `cannot reach the API server at ${server}: ${
        describeCause(cause)
      }. Check that it is up and that --kubeconfig/--context point at it`,
      { cause },
    );
  }
}

/** A watch stream delivered nothing (not even a bookmark) for longer than its idle timeout. */
export class WatchIdleError extends Error {
  override readonly name = 'WatchIdleError';

  constructor(path: string, idleMs: number) {
    super(`watch ${path} was silent for ${Math.round(idleMs / 1000)} s; reconnecting`);
  }
}

function describeCause(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  // A wrapped socket error ("fetch failed", a proxy agent's) has the useful part in `cause`.
  const inner = cause.cause instanceof Error ? cause.cause : undefined;
  const code = inner && 'code' in inner ? ` (${String(inner.code)})` : '';
  return inner ? `${inner.message}${code}` : cause.message;
}

/** The kubeconfig, the in-cluster service account or a credential plugin cannot give us a usable identity. */
export class KubeConfigError extends UsageError {
  override readonly name: string = 'KubeConfigError';
}
