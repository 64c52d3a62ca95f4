// The errors the client raises: every way a request can fail is one of these classes, so an
// application can tell a refused request from a dead server from a garbled line, and none of them
// is a hang. client.ts raises them; protocol.ts raises RemitProtocolError.

import type { ErrorCode, ErrorReply } from "./protocol";

/** The base class of every error this package raises. */
export class RemitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The server answered the request with an `error` reply (docs/serve.md, "Errors"). */
export class RemitServerError extends RemitError {
  /** `bad_request`, `unknown_session`, `session_busy`, `wrong_call`, `not_paused`, `too_many_sessions` or `host_error`. */
  readonly code: ErrorCode;
  /** The reply as the server sent it. */
  readonly reply: ErrorReply;
  constructor(reply: ErrorReply) {
    super(`${reply.error.code}: ${reply.error.message}`);
    this.code = reply.error.code;
    this.reply = reply;
  }
}

/** `remitvm serve` could not be started, exited, or closed its output while requests were waiting. */
export class RemitProcessError extends RemitError {
  /** The exit code, or null when the process did not exit normally (or never started). */
  readonly exitCode: number | null;
  /** The signal that ended it, if one did. */
  readonly signal: string | null;
  /** The last lines the server wrote on stderr (at most 4 KiB). */
  readonly stderr: string;
  constructor(message: string, exitCode: number | null, signal: string | null, stderr: string) {
    super(message);
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderr = stderr;
  }
}

/** The server printed something that is not a reply of the protocol. The client stops the server. */
export class RemitProtocolError extends RemitError {
  /** The offending line, cut to 200 characters. */
  readonly line: string;
  constructor(message: string, line: string) {
    super(message);
    this.line = line.length > 200 ? `${line.slice(0, 200)}…` : line;
  }
}

/** No reply came within the request's timeout. The client aborts the session. */
export class RemitTimeoutError extends RemitError {
  readonly timeoutMs: number;
  constructor(message: string, timeoutMs: number) {
    super(message);
    this.timeoutMs = timeoutMs;
  }
}

/** The request was refused by the client before it was sent (too large, or the client is closed). */
export class RemitRequestError extends RemitError {}
