// RemitClient: one `remitvm serve` process and the requests in flight to it. It starts the
// server, writes each request as one line, matches each reply to its request by id, and turns
// every failure — an `error` reply, a server that exits, a line that is not a reply, a reply that
// never comes — into a typed error (errors.ts) that rejects the waiting promises. The message
// types are protocol.ts's.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

import {
  RemitError,
  RemitProcessError,
  RemitRequestError,
  RemitServerError,
  RemitTimeoutError,
} from "./errors";
import {
  decodeReply,
  type AbortRequest,
  type Fail,
  type HostCall,
  type HostCallReply,
  type JsonValue,
  type Outcome,
  type Reply,
  type Request,
  type ResumeRequest,
  type RunRequest,
} from "./protocol";

/** How to start the server. */
export interface StartOptions {
  /** The `remitvm` program: a path, or a name looked up on PATH. Default: $REMITVM, else `remitvm`. */
  remitvm?: string;
  /** The server's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** The server's working directory. */
  cwd?: string;
  /**
   * How long to wait for each reply, in milliseconds, beyond the run's own wall limit
   * (default 30,000). A run or resume still unanswered after that fails with RemitTimeoutError
   * and its session is aborted.
   */
  replyTimeoutMs?: number;
}

/** A `run` request without its envelope; the session id is made up (unique to this client) unless given. */
export type RunOptions = Omit<RunRequest, "type" | "id" | "session"> & { session?: string };

/** What a handler passed to execute() answers for a host call. */
export type CallAnswer =
  | { perform: JsonValue; cost_usd?: number }
  | { deny: string | null }
  | { fail: Fail };

/** The end of a run: anything but a pause. */
export type Final = Exclude<Outcome, HostCallReply>;

// The server's limits (docs/serve.md): a longer request line is refused unread.
const kMaxRequestBytes = 8 << 20;
const kDefaultWallMs = 5_000;
const kStderrKept = 4096;

interface Waiter {
  session: string;
  type: Request["type"];
  resolve: (reply: Reply) => void;
  reject: (error: Error) => void;
  timer?: NodeJS.Timeout;
}

export class RemitClient {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiters = new Map<number, Waiter>();
  // Aborts sent while the session's run or resume was being processed: that request's reply
  // answers them too (the server then sends no reply of the abort's own).
  private readonly aborts = new Map<string, Set<number>>();
  // Wall limits of the sessions this client started, for reply timeouts of their resumes.
  private readonly wallMs = new Map<string, number>();
  private readonly replyTimeoutMs: number;
  private nextId = 1;
  private nextSession = 1;
  private stderrTail = "";
  private failure: RemitError | null = null;
  private readonly exited: Promise<number | null>;

  private constructor(child: ChildProcessWithoutNullStreams, replyTimeoutMs: number) {
    this.child = child;
    this.replyTimeoutMs = replyTimeoutMs;
    child.stdin.on("error", () => {
      // EPIPE after the server died: the exit handler reports it.
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-kStderrKept);
    });
    const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => this.onLine(line));
    this.exited = new Promise((resolve) => {
      child.on("error", (error) => {
        this.failAll(new RemitProcessError(`remitvm serve could not be started: ${error.message}`, null, null, ""));
        resolve(null);
      });
      child.on("close", (code, signal) => {
        const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        const tail = this.stderrTail.trim();
        this.failAll(
          new RemitProcessError(
            `remitvm serve ${how} before answering${tail ? `: ${tail.split("\n").slice(-1)[0]}` : ""}`,
            code,
            signal,
            this.stderrTail,
          ),
        );
        resolve(code);
      });
    });
  }

  /** Starts `remitvm serve` and resolves once it is running. */
  static async start(options: StartOptions = {}): Promise<RemitClient> {
    const program = options.remitvm ?? process.env.REMITVM ?? "remitvm";
    const child = spawn(program, ["serve"], { env: options.env, cwd: options.cwd, stdio: ["pipe", "pipe", "pipe"] });
    const client = new RemitClient(child, options.replyTimeoutMs ?? 30_000);
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", (error) =>
        reject(new RemitProcessError(`remitvm serve could not be started (${program}): ${error.message}`, null, null, "")),
      );
    });
    return client;
  }

  /** Checks and starts a program: a pause at its first host call, or its end. */
  async run(options: RunOptions): Promise<Outcome> {
    const { session: chosen, ...fields } = options;
    const session = chosen ?? `remit-client-${process.pid}-${this.nextSession++}`;
    const wall = options.limits?.wall_ms ?? kDefaultWallMs;
    this.wallMs.set(session, wall);
    const request: RunRequest = { type: "run", session, ...fields };
    return (await this.send(request, wall)) as Outcome;
  }

  /** Answers the pause with the call's result (null for Unit) and, optionally, what it cost. */
  perform(pause: HostCallReply, result: JsonValue, costUsd?: number): Promise<Outcome> {
    const perform = costUsd === undefined ? { result } : { result, cost_usd: costUsd };
    return this.resume({ type: "resume", session: pause.session, call: pause.call.id, perform });
  }

  /** Refuses the call: the run fails with R0303 (stage `denied`). */
  deny(pause: HostCallReply, reason?: string): Promise<Outcome> {
    return this.resume({ type: "resume", session: pause.session, call: pause.call.id, deny: reason ? { reason } : {} });
  }

  /** Reports the call as attempted and failed (operational: the call's retry and else apply). */
  fail(pause: HostCallReply, fail: Fail = {}): Promise<Outcome> {
    return this.resume({ type: "resume", session: pause.session, call: pause.call.id, fail });
  }

  /**
   * Stops a session wherever it is. Resolves with the session's last reply: `failed` with stage
   * `aborted`, or, when the run ended by itself before the abort reached it, that ending.
   * A session that is not running is a RemitServerError (`unknown_session`).
   */
  async abort(session: string | HostCallReply): Promise<Final> {
    const name = typeof session === "string" ? session : session.session;
    const request: AbortRequest = { type: "abort", session: name };
    return (await this.send(request, 0)) as Final;
  }

  /**
   * Runs a program to its end, asking `onCall` to answer each host call: the usual loop of a
   * host. A handler that throws aborts the session and rethrows.
   */
  async execute(options: RunOptions, onCall: (call: HostCall, pause: HostCallReply) => CallAnswer | Promise<CallAnswer>): Promise<Final> {
    let outcome = await this.run(options);
    while (outcome.status === "host-call") {
      const pause = outcome;
      let answer: CallAnswer;
      try {
        answer = await onCall(pause.call, pause);
      } catch (error) {
        await this.abort(pause).catch(() => undefined);
        throw error;
      }
      if ("perform" in answer) outcome = await this.perform(pause, answer.perform, answer.cost_usd);
      else if ("deny" in answer) outcome = await this.deny(pause, answer.deny ?? undefined);
      else outcome = await this.fail(pause, answer.fail);
    }
    return outcome;
  }

  /**
   * Ends the server: closes its input, so paused sessions end (stage `aborted`) and running ones
   * finish, and waits for it to exit — killing it after `timeoutMs` (default 30 s). Resolves with
   * its exit code (null when it was killed).
   */
  async close(timeoutMs = 30_000): Promise<number | null> {
    if (!this.child.stdin.destroyed) this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops the server at once (SIGKILL); waiting requests fail with RemitProcessError. */
  kill(): void {
    this.child.kill("SIGKILL");
  }

  /** The server's process id. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  private async resume(request: ResumeRequest): Promise<Outcome> {
    return (await this.send(request, this.wallMs.get(request.session) ?? kDefaultWallMs)) as Outcome;
  }

  private send(request: Request, wallMs: number): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    const line = JSON.stringify({ ...request, id });
    if (Buffer.byteLength(line) > kMaxRequestBytes)
      return Promise.reject(
        new RemitRequestError(`the request is ${Buffer.byteLength(line)} bytes, over the server's limit of ${kMaxRequestBytes}`),
      );
    return new Promise<Reply>((resolve, reject) => {
      const waiter: Waiter = { session: request.session, type: request.type, resolve, reject };
      const timeoutMs = this.replyTimeoutMs + wallMs;
      waiter.timer = setTimeout(() => {
        this.waiters.delete(id);
        reject(new RemitTimeoutError(`no reply to this ${request.type} within ${timeoutMs} ms; the session was aborted`, timeoutMs));
        if (request.type !== "abort") this.write({ type: "abort", session: request.session });
      }, timeoutMs);
      this.waiters.set(id, waiter);
      if (request.type === "abort") {
        // Remembered until the session's running request answers, or the abort's own reply comes.
        const pending = [...this.waiters.values()].some((w) => w.session === request.session && w.type !== "abort");
        if (pending) {
          const set = this.aborts.get(request.session) ?? new Set<number>();
          set.add(id);
          this.aborts.set(request.session, set);
        }
      }
      this.write({ ...request, id });
    });
  }

  private write(message: Request & { id?: number }): void {
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    if (line.trim() === "") return;
    let reply: Reply;
    try {
      reply = decodeReply(line);
    } catch (error) {
      // The stream can no longer be trusted to pair replies with requests: stop here.
      this.failAll(error as RemitError);
      this.child.kill("SIGKILL");
      return;
    }
    const id = typeof reply.id === "number" ? reply.id : undefined;
    const waiter = id === undefined ? undefined : this.waiters.get(id);
    if (id !== undefined && waiter) {
      this.waiters.delete(id);
      clearTimeout(waiter.timer);
      if (waiter.type === "abort") this.aborts.get(waiter.session)?.delete(id);
      if (reply.status === "error") waiter.reject(new RemitServerError(reply));
      else waiter.resolve(reply);
    }
    if (reply.status === "host-call" || reply.status === "error") return;
    // The session has ended: its last reply also answers the aborts sent while it was running.
    for (const abortId of this.aborts.get(reply.session) ?? []) {
      const abort = this.waiters.get(abortId);
      if (!abort) continue;
      this.waiters.delete(abortId);
      clearTimeout(abort.timer);
      abort.resolve(reply);
    }
    this.aborts.delete(reply.session);
    this.wallMs.delete(reply.session);
  }

  // Every waiting request fails with `error`, and so does every later one.
  private failAll(error: RemitError): void {
    if (!this.failure) this.failure = error;
    for (const [id, waiter] of this.waiters) {
      clearTimeout(waiter.timer);
      waiter.reject(this.failure);
      this.waiters.delete(id);
    }
    this.aborts.clear();
  }
}
