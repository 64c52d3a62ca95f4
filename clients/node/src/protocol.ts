// The messages of `remitvm serve` (docs/serve.md in the Remit repository), one type per message,
// and the decoder that turns a reply line into one of them. The client (client.ts) sends the
// request types and hands back the reply types; applications import both from the package root.
//
// The field names are the protocol's own (snake_case), so a reply is the JSON the server printed,
// checked: decodeReply refuses a line that is not one of the replies below (a typed
// RemitProtocolError, never a half-read object), and keeps fields it does not know (a newer
// server's additions) so that an older client still works.

import { RemitProtocolError } from "./errors";

/** Any JSON value: what a program's inputs, a call's arguments and results are made of. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A request's id, echoed in its reply: a string of at most 256 bytes or an integer. */
export type RequestId = string | number;

// ---------------------------------------------------------------- requests

/** `ask`: a person should decide each call; `allow`: the host may perform it without asking. */
export type GrantMode = "ask" | "allow";

/** One grant of a run: a capability or model the host interface declares, with a policy grant's settings. */
export interface Grant {
  name: string;
  mode?: GrantMode;
  max_calls?: number;
  arg_prefix?: Record<string, string[]>;
  arg_one_of?: Record<string, JsonValue[]>;
  arg_max?: Record<string, number>;
  approve?: Record<string, string[]>;
  approval?: "always";
}

/** The limits of one run; each a positive integer (docs/serve.md, "Limits"). */
export interface Limits {
  steps?: number;
  wall_ms?: number;
  host_calls?: number;
  result_bytes?: number;
  memory?: number;
}

/** `run`: check `program` against `host` and `grants`, then run it. */
export interface RunRequest {
  type: "run";
  id?: RequestId;
  session: string;
  /** The program text. (Its older name `source` is accepted by the server; this client sends `program`.) */
  program: string;
  /** The host interface text; may be empty. */
  host: string;
  grants?: Grant[];
  /** The run's budget in dollars. */
  budget?: number;
  inputs?: Record<string, JsonValue>;
  limits?: Limits;
  expected_type?: string;
  max_diagnostics?: number;
  strict_flows?: boolean;
}

/** The host performed the call: its result (null for Unit) and, optionally, what it cost. */
export interface Perform {
  result: JsonValue;
  cost_usd?: number;
}

/** The host refuses the call: the run fails with R0303. */
export interface Deny {
  reason?: string;
}

/** The call was attempted and failed: operational, so the call's `retry` and `else` apply. */
export interface Fail {
  error?: "CapabilityFailed" | "Timeout";
  message?: string;
}

/** `resume`: answers the host call a session is paused at, with exactly one of perform, deny and fail. */
export type ResumeRequest = {
  type: "resume";
  id?: RequestId;
  session: string;
  call: number;
} & ({ perform: Perform } | { deny: Deny } | { fail: Fail });

/** `abort`: stops a session wherever it is. */
export interface AbortRequest {
  type: "abort";
  id?: RequestId;
  session: string;
}

export type Request = RunRequest | ResumeRequest | AbortRequest;

// ---------------------------------------------------------------- replies

/** A position in `program.rmt` (1-based lines and columns, the end exclusive). */
export interface Span {
  line: number;
  col: number;
  end_line: number;
  end_col: number;
}

/** One diagnostic, in the JSON shape of `remitc check --json`. */
export interface Diagnostic {
  code: string;
  severity: "error" | "warning";
  message: string;
  /** `program.rmt`, `host.rmti`, `expected_type` or `grants`. */
  file: string;
  /** null when the diagnostic has no position (checking was interrupted). */
  line: number | null;
  col: number | null;
  end_line: number | null;
  end_col: number | null;
  hint: string | null;
  notes: string[];
  details?: JsonValue;
}

/** The first stage of the pipeline that rejected the program. */
export type RejectStage = "parse" | "typecheck" | "grant" | "bounds" | "flow" | "expected-type";
/** What kind of failure ended a run. */
export type FailStage = "evaluate" | "limit" | "denied" | "aborted";
export type ErrorCode =
  | "bad_request"
  | "unknown_session"
  | "session_busy"
  | "wrong_call"
  | "not_paused"
  | "too_many_sessions"
  | "host_error";

/** The call a run is paused at. */
export interface HostCall {
  /** The call's number in its session (1, 2, …); a resume names it. */
  id: number;
  kind: "capability" | "model" | "agent";
  /** The capability, or the model the call is granted under. */
  resource: string;
  /** An agent call's agent. */
  agent?: string;
  /** An agent call's system prompt. */
  system?: string;
  /** The call site id, `fn#k`, as in the manifest. */
  site: string;
  span: Span | null;
  mode: GrantMode;
  /** Why the call needs approval, in the broker's words. */
  reasons: string[];
  /** The arguments by parameter name (models: `prompt`, `context`). */
  args: Record<string, JsonValue>;
  arg_tags: Record<string, string[]>;
  pc_tags: string[];
  /** 0-based; a retry pauses again with attempt + 1 and a new id. */
  attempt: number;
  /** The declared return type (capabilities) or the requested type (models). */
  returns: string;
  /** A model call's requested type as JSON Schema. */
  schema?: JsonValue;
  /** The tags the result will carry. */
  result_tags: string[];
}

interface ReplyBase {
  /** The request's id, when it had one. */
  id?: RequestId;
  session: string;
}

/** The program does not run: nothing has run and no host call was made. */
export interface RejectedReply extends ReplyBase {
  status: "rejected";
  stage: RejectStage;
  diagnostics: Diagnostic[];
  /** The diagnostics as `remitc check` prints them, ready for a model's prompt. */
  rendered: string;
  /** Every capability and model the program needs, sorted. */
  requires: string[];
}

/** The run is paused at a host call: perform, deny or fail it. */
export interface HostCallReply extends ReplyBase {
  status: "host-call";
  call: HostCall;
}

/** The run finished with `main`'s value. */
export interface CompletedReply extends ReplyBase {
  status: "completed";
  result: JsonValue;
  /** `main`'s static type. */
  type: string;
  /** The result's deep tags. */
  result_tags: string[];
  /** The same list under its older name. */
  tags: string[];
  host_calls: number;
  steps: number;
  spent_usd: number;
}

/** The run failed: one runtime diagnostic. */
export interface FailedReply extends ReplyBase {
  status: "failed";
  stage: FailStage;
  diagnostics: Diagnostic[];
  rendered: string;
  host_calls: number;
}

/** The request could not be served. The client raises it as a RemitServerError. */
export interface ErrorReply {
  status: "error";
  id?: RequestId;
  session?: string;
  error: { code: ErrorCode; message: string };
}

/** What a run or resume answers: a pause or the end of the session. */
export type Outcome = RejectedReply | HostCallReply | CompletedReply | FailedReply;
export type Reply = Outcome | ErrorReply;

// ---------------------------------------------------------------- decoding

// A field's JSON kind; `?` after it: it may be null; `optional ` before it: it may be missing.
type Kind =
  | "string" | "number" | "integer" | "array" | "object" | "any" | "id"
  | "string?" | "integer?" | "object?";
type Field = Kind | `optional ${Kind}`;

// Every field of each reply, with its JSON kind: the one table decodeReply enforces and the tests
// hold the types above to (declaredFields).
const replyFields: Record<Reply["status"], Record<string, Field>> = {
  rejected: {
    status: "string", id: "optional id", session: "string", stage: "string", diagnostics: "array",
    rendered: "string", requires: "array",
  },
  "host-call": { status: "string", id: "optional id", session: "string", call: "object" },
  completed: {
    status: "string", id: "optional id", session: "string", result: "any", type: "string", result_tags: "array",
    tags: "array", host_calls: "integer", steps: "integer", spent_usd: "number",
  },
  failed: {
    status: "string", id: "optional id", session: "string", stage: "string", diagnostics: "array",
    rendered: "string", host_calls: "integer",
  },
  error: { status: "string", id: "optional id", session: "optional string", error: "object" },
};

const callFields: Record<string, Field> = {
  id: "integer", kind: "string", resource: "string", agent: "optional string", system: "optional string",
  site: "string", span: "object?", mode: "string", reasons: "array", args: "object", arg_tags: "object",
  pc_tags: "array", attempt: "integer", returns: "string", schema: "optional any", result_tags: "array",
};

const diagnosticFields: Record<string, Field> = {
  code: "string", severity: "string", message: "string", file: "string", line: "integer?", col: "integer?",
  end_line: "integer?", end_col: "integer?", hint: "string?", notes: "array", details: "optional any",
};

const errorFields: Record<string, Field> = { code: "string", message: "string" };

function isKind(value: unknown, kind: Kind): boolean {
  if (kind.endsWith("?") && value === null) return true;
  switch (kind.replace("?", "")) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number";
    case "integer":
      return Number.isInteger(value);
    case "id":
      return typeof value === "string" || Number.isInteger(value);
    case "array":
      return Array.isArray(value);
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    default:
      return value !== undefined;
  }
}

function check(object: Record<string, unknown>, fields: Record<string, Field>, where: string, line: string): void {
  for (const [name, field] of Object.entries(fields)) {
    const optional = field.startsWith("optional ");
    if (optional && object[name] === undefined) continue;
    if (!isKind(object[name], (optional ? field.slice("optional ".length) : field) as Kind)) {
      const what = object[name] === undefined ? "has no" : "has a malformed";
      throw new RemitProtocolError(`the server's ${where} ${what} '${name}'`, line);
    }
  }
}

/** Decodes one line printed by `remitvm serve`; a line that is not a reply is a RemitProtocolError. */
export function decodeReply(line: string): Reply {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new RemitProtocolError("the server printed a line that is not JSON", line);
  }
  if (!isKind(value, "object")) throw new RemitProtocolError("the server printed a line that is not a JSON object", line);
  const reply = value as Record<string, unknown>;
  const status = reply.status;
  if (typeof status !== "string" || !Object.prototype.hasOwnProperty.call(replyFields, status))
    throw new RemitProtocolError(`the server printed a reply with an unknown status ${JSON.stringify(status)}`, line);
  check(reply, replyFields[status as Reply["status"]], `'${status}' reply`, line);
  if (status === "host-call") check(reply.call as Record<string, unknown>, callFields, "host call", line);
  if (status === "error") check(reply.error as Record<string, unknown>, errorFields, "error", line);
  if (status === "rejected" || status === "failed")
    for (const d of reply.diagnostics as unknown[]) {
      if (!isKind(d, "object")) throw new RemitProtocolError("the server's diagnostic is not an object", line);
      check(d as Record<string, unknown>, diagnosticFields, "diagnostic", line);
    }
  return reply as unknown as Reply;
}

/** The field names each reply type declares: what the tests hold the server's replies to. */
export const declaredFields: Record<Reply["status"] | "call" | "diagnostic" | "error_detail", readonly string[]> = {
  rejected: Object.keys(replyFields.rejected),
  "host-call": Object.keys(replyFields["host-call"]),
  completed: Object.keys(replyFields.completed),
  failed: Object.keys(replyFields.failed),
  error: Object.keys(replyFields.error),
  call: Object.keys(callFields),
  diagnostic: Object.keys(diagnosticFields),
  error_detail: Object.keys(errorFields),
};
