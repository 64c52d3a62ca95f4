// remit-client: a client for `remitvm serve`, the checked-run server of Remit (docs/serve.md).
// The package's entry point: the client (client.ts), the protocol's message types and reply
// decoder (protocol.ts), and the errors it raises (errors.ts).

export { RemitClient } from "./client";
export type { CallAnswer, Final, RunOptions, StartOptions } from "./client";
export {
  RemitError,
  RemitProcessError,
  RemitProtocolError,
  RemitRequestError,
  RemitServerError,
  RemitTimeoutError,
} from "./errors";
export { declaredFields, decodeReply } from "./protocol";
export type * from "./protocol";
