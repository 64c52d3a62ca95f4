// The broker (docs/broker.md; docs/architecture.md "The one seam"): the one path from a
// run to the world. It drives a remit::Run, and for every host-call ATTEMPT the run stops at it
// applies, in the prototype's order:
//   (agent max_calls) → resource known → grant (R0303) → deny tags vs deep argument tags (R0301,
//   `violation` event) → arg_prefix, arg_one_of, arg_max (R0301) → call limit (R0402) → per-site
//   counter k and idempotency key → approval (store, single use; `pending_approval` and R0302) →
//   budget reservation (R0401) → dispatch to the adapter → reconcile cost → validate the result
//   against the declared type (R0501) or the ask type (R0502, `invalid_output`) → tag and
//   provenance every node of the result → `call` event.
// With a replay plan (resume, replay; broker/replay.h) step 7 comes between the counter and the
// approval, as in the prototype: the next recorded call must have the same resource, site and
// canonical arguments (else R0601); it is answered from the record, re-tagged, re-emitted with
// `replayed: true`, and never dispatched. Every live dispatch is announced by a synced `dispatch`
// event, so a crash during an effect leaves the call "in flight" for the next resume.
// A retry (attempt > 0) of a non-idempotent capability is R0405. Security and limit errors are
// final (not operational); adapter failures are operational, so the VM retries them or takes the
// site's `else` (for which the broker writes a `fallback` event).
//
// Invariants:
// - Nothing reaches the adapter before every rule passed and the trace was synced.
// - `seq` counts call events, 1-based; it is the provenance leaf of the call's result.
// - Between calls nothing is reserved: a reservation lives only across one dispatch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "broker/adapter.h"
#include "broker/approvals.h"
#include "broker/budget.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "runtime/host_model.h"
#include "runtime/json_text.h"
#include "runtime/policy.h"
#include "vm/run.h"

namespace remit {

// The request a paused run waits for (the `approval_required` envelope's `pending`).
struct PendingApproval {
    std::string digest, site, resource;
    Json args;
    std::vector<std::string> reasons;
};

struct BrokerOptions {
    std::string runId;
    std::string idempotencyRoot;  // the first run's id (resume keeps it)
    std::string programHash;
    const HostModel* host = nullptr;
    const Policy* policy = nullptr;
    TraceWriter* trace = nullptr;         // null: no trace (tests)
    ApprovalStore* approvals = nullptr;   // null: every approval is denied (pending)
    // The ledger of the policy's shared budget scope ([budget] scope; broker/budget.h). Null: a
    // policy that names a scope refuses every dispatch (R0401), since nothing could keep it.
    BudgetLedger* ledger = nullptr;
    bool approveAll = false;              // --approve-all: approved_by "auto-approve(test)"
    std::optional<double> programBudget;  // the program's `budget usd`
    uint64_t defaultTimeoutMs = 30'000;   // for calls without a `timeout`
    const ReplayPlan* replay = nullptr;   // resume and replay: the recorded calls
    // The trace's `adapter` field on call events: "fixture", "process", "live", or "host" (serve).
    std::string adapterKind = "none";
    // Strict flows: `deny` parameters refuse the pc's tags too (R0301 via control flow).
    bool strictFlows = false;
};

// A capability parameter that received data its `deny` list refuses: the parameter and the
// refused tags, sorted. The deep tags of each argument count; the pc counts only in strict-flows
// mode (docs/language.md "Strict flows"), and then `viaControl` says the tags came that way.
struct DenyViolation {
    std::string param;
    std::vector<std::string> tags;
    bool viaControl = false;
    // The R0301 message and details, in the broker's words.
    std::string message(const std::string& resource) const;
    Json details(const std::string& resource) const;
};
// The first such parameter of `cap` among the call's arguments (`argTags[i]` belongs to
// `argNames[i]`), or nothing; `strictPc` is the pc in strict mode, else kNoTags. Shared by the
// broker and the serve sessions.
std::optional<DenyViolation> deniedArgument(const Heap& heap, const Capability& cap,
                                            const std::vector<std::string>& argNames,
                                            const std::vector<TagSetId>& argTags, TagSetId strictPc = kNoTags);

// The call a replay without live calls stopped at (the record was used up).
struct UnrecordedCall {
    std::string resource, site;
    Json args;
};


// What the broker decided about one attempt of a host call. The embedder acts on it: performs a
// Dispatch with its adapter and hands the reply to complete(); asks a person about NeedsApproval
// and answers approved() or decline(); and hands Answered or Refuse to settle(), which resumes the
// run. driveWith does all of that for the synchronous paths.
struct Decision {
    enum class Kind : uint8_t {
        Dispatch,       // every rule passed, the budget is reserved, the dispatch is recorded: perform `request`
        Refuse,         // the attempt fails with `error` (`operational`: retry and else apply)
        NeedsApproval,  // nobody has approved `pending` yet (a `pending_approval` event is recorded)
        Answered,       // the attempt's result: a replayed record, or a completed dispatch
    } kind = Kind::Refuse;
    AdapterRequest request;                 // Dispatch
    std::vector<std::string> reasons;       // Dispatch, NeedsApproval: why approval is or was needed
    std::optional<std::string> approvedBy;  // Dispatch after an approval
    std::string approvalDigest;             // Dispatch after an approval: what it bound to
    TagSetId resultTags = kNoTags;          // Dispatch: the tags a result will carry
    std::optional<PendingApproval> pending; // NeedsApproval
    RuntimeError error;                     // Refuse
    bool operational = false;               // Refuse
    std::optional<Value> value;             // Answered (in the run's heap)
    // Answered or Refuse from a recorded call (resume, replay): the request it stood for, so an
    // adapter that keeps state by the order of calls (fixtures) can move past it (Adapter::replayed).
    std::optional<AdapterRequest> replayed;
};

// Answers a request for approval: who approved it, or nothing to leave it pending.
using Approver = std::function<std::optional<std::string>(const PendingApproval&)>;

class Broker {
public:
    Broker(BrokerOptions options, Run& run);

    // The decision interface. One attempt is in progress at a time: decide() starts it; after
    // NeedsApproval comes approved() or decline(); after Dispatch comes complete() (or cancel()
    // when the embedder will not perform it after all — only without a trace, as in serve, since a
    // cancelled dispatch would look in flight to a resume). settle() resumes the run with an
    // Answered or Refuse decision (writing the `fallback` event when the site's `else` runs).
    Decision decide(const HostCall& call);
    Decision approved(const std::string& by);
    // approved()'s counterpart: the person asked said no. The denial goes through the store, when
    // there is one, as `remitvm approvals deny` records it (and is used up by this attempt); the
    // attempt fails with R0302 naming `by` and `reason`, and an `approval_denied` event is recorded.
    Decision denied(const std::string& by, const std::string& reason);
    // The call waiting for approval, asked of the approval store again: an operator may have
    // approved it since (`remitvm approve`). Dispatch when the store now holds an approval (it is
    // consumed), else NeedsApproval again, recording nothing twice.
    Decision recheckApproval();
    Decision decline();  // the run pauses: pending() is set and the decision is R0302
    Decision complete(const AdapterReply& reply);
    Decision cancel(RuntimeError error);
    RunStatus settle(Decision decision);

    double spent() const { return spent_; }
    uint64_t calls() const { return seq_; }
    // Set when the run failed with R0302 because a call waits for approval.
    const std::optional<PendingApproval>& pending() const { return pending_; }
    // Set when the broker stopped the run (R0702) because the host could not keep its records: the
    // trace or the approval store could not be written (or the store read or locked). Nothing was
    // dispatched after it; the CLI reports it (exit 2), and the run can be resumed once fixed.
    const std::string& ioError() const { return stopped_; }
    // Set when the broker stopped the run (R0702) because a dispatch did not reach the adapter
    // (AdapterReply::delivered): its process could not be started, or ended without reading the
    // request. No call was recorded, a `not_delivered` event was, and an approval the attempt had
    // consumed is back in the store; the CLI reports it (exit 2), and a resume once the adapter is
    // fixed makes the same attempt (same key) under the same approval.
    struct NotDelivered {
        std::string resource, site, message;
        std::string approvedBy;  // the approval that was given back to the store, or empty
    };
    const std::optional<NotDelivered>& notDelivered() const { return notDelivered_; }
    // Replay: how many recorded calls were answered, and the call asked for after the last one.
    size_t replayed() const { return replayed_; }
    const std::optional<UnrecordedCall>& unrecorded() const { return unrecorded_; }
    // Resume: the in-flight calls of the plan this run has not sent again (for its run_start they
    // are known before it starts; this is what is left at the end).
    std::vector<InFlightCall> unresolvedInFlight() const;

private:
    // The attempt between decide() and its last decision.
    struct Attempt {
        const HostCall* call = nullptr;
        const Capability* cap = nullptr;
        const ModelInfo* model = nullptr;
        const Grant* grant = nullptr;
        Json rawArgs;
        std::vector<TagSetId> argTags;
        std::vector<ProvId> argProv;  // each argument's deep provenance
        TagSetId allArgTags = kNoTags;
        ProvId prov = kNoProv;
        uint64_t k = 0;
        std::string key, argsSha, digest;
        std::string argsText;  // canonicalJson(rawArgs): hashed for argsSha, written in the call record
        std::optional<size_t> inFlight;  // the plan's in-flight call this attempt sends again
        std::vector<std::string> reasons;
        Json approval = nullptr;
        double reserve = 0;
        bool ledgerHeld = false;  // the shared scope's ledger holds a reservation for this attempt
        std::chrono::steady_clock::time_point sent;
        enum class State : uint8_t { Checking, AwaitingApproval, Dispatched } state = State::Checking;
        mutable std::optional<std::pair<Json, Json>> provenance;  // provenanceOf's
    };

    BrokerOptions options_;
    Run& run_;
    std::optional<double> budget_;
    std::optional<BudgetScope> scope_;  // the policy's shared scope
    double spent_ = 0, reserved_ = 0;
    uint64_t seq_ = 0;
    std::map<std::string, int64_t> calls_;       // per resource (agents under their model)
    std::map<std::string, int64_t> agentCalls_;  // per agent
    std::map<std::string, uint64_t> siteSeq_;    // per site: k
    std::optional<PendingApproval> pending_;
    std::string stopped_;
    std::optional<NotDelivered> notDelivered_;
    size_t replayed_ = 0;
    std::optional<UnrecordedCall> unrecorded_;
    std::vector<bool> inFlightSent_;
    std::optional<Attempt> current_;
    std::optional<AdapterRequest> replayedRequest_;
    // Per site: the last answer of the call in progress there that did not fit its type, for the
    // repair turn of its retry (AdapterRequest::previous). Replayed calls set it too, so a resumed
    // run's retry carries what the uninterrupted run's would have.
    std::map<std::string, AdapterRequest::Previous> lastInvalid_;
    // Per capability: the JSON Schema and the name of its declared return type, for requestFor.
    mutable std::map<const Capability*, std::pair<Json, std::string>> returnShapes_;

    Decision refuse(RuntimeError error, bool operational = false);
    Decision answered(Value value);
    Decision grantApproval(const std::string& who);
    Decision refuseDenied(const Denial& denial);  // an operator denied the call: R0302, recorded
    Decision reserveAndDispatch();
    Decision refuseNotDelivered(const Attempt& a, const AdapterReply& reply);
    Decision replayRecorded(const Attempt& a);
    nlohmann::json approvalRequest(const Attempt& a) const;
    // A call's provenance as events record it: {param: [tag]} and the seqs its arguments derive from
    // (made once per attempt: the request and the records share it).
    const std::pair<Json, Json>& provenanceOf(const Attempt& a) const;
    // {param: [seq]}: the calls each argument derives from (a pending request shows them per argument).
    Json argDerivedFrom(const Attempt& a) const;
    AdapterRequest requestFor(const Attempt& a) const;
    // (declared ∪ deep argument tags ∪ pc) − clears.
    std::optional<TagSetId> resultTagsFor(const HostCall& call, TagSetId allArgTags);
    // Writes an event to the trace (and fsyncs it when `durable`); false when the trace failed.
    bool record(const Json& event, bool durable = false);
    bool record(const CanonicalObject& event, bool durable = false);
    // Stops the run: R0702, non-operational (no retry, no else), `why` kept for ioError().
    Decision stop(std::string why);
    Decision stopForTrace(const std::string& what);
    // Drops the attempt's reservation in the shared scope's ledger (it was not sent); false with
    // the run stopped when the ledger cannot be changed.
    void releaseReservation(Attempt& a);
    // Turns a result (live or recorded) into a value: tags, provenance, the declared or asked type.
    struct Decoded {
        std::optional<Value> value;
        std::optional<RuntimeError> error;  // the result does not fit (R0501), or out of memory
        bool operational = true;
        std::optional<std::string> invalidOutput;  // a model's output that does not fit its type
        TagSetId tags = kNoTags;
    };
    Decoded decodeResult(const HostCall& call, const Json& result, TagSetId allArgTags, ProvId prov, uint64_t seq);
    void emit(const Json& event);
};

// Watches the attempts driveWith carries out, for a front end that shows them as they happen
// (`remitvm run --progress`). It sees the broker's decisions only: `started` gets the decision
// about to be carried out (Dispatch, Answered from a record, or Refuse), `finished` the outcome
// settle() resumes the run with (Answered or Refuse). Both are called while run.hostCall() is
// the attempt's call.
class CallWatcher {
public:
    virtual ~CallWatcher() = default;
    virtual void started(const HostCall& call, const Decision& decision) = 0;
    virtual void finished(const HostCall& call, const Decision& outcome) = 0;
};

// The synchronous driver: decides each host call, asks `approve` when a call needs approval
// (nothing, or no approver, pauses the run with R0302), performs dispatches with `adapter` (none:
// every call fails operationally), and resumes the run until it completes or fails.
// With `waiting`, a call nobody approves leaves the run paused at it instead: the request is
// stored there and the status (HostCall) returned; answer it with approved() or decline() and
// carryOut(), then drive on. `watcher`, when given, sees each attempt start and finish.
RunStatus driveWith(Run& run, Broker& broker, Adapter* adapter, const Approver& approve = {},
                    std::optional<PendingApproval>* waiting = nullptr, CallWatcher* watcher = nullptr);
// Performs a Dispatch decision with `adapter` (none: the call fails operationally) and returns
// the broker's outcome; any other decision is returned as it is.
Decision performDecision(Broker& broker, Adapter* adapter, Decision decision);
// performDecision(), then settle the outcome.
RunStatus carryOut(Broker& broker, Adapter* adapter, Decision decision);

}  // namespace remit
