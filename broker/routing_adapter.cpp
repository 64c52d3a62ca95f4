// Several adapters behind one: see routing_adapter.h.
#include "broker/routing_adapter.h"

#include <fmt/format.h>

namespace remit {

namespace {

const std::string& nameOf(const AdapterRequest& request) {
    return request.kind == AdapterRequest::Kind::Ask ? request.model : request.resource;
}

}  // namespace

RoutingAdapter::RoutingAdapter(std::vector<std::unique_ptr<Adapter>> adapters) : adapters_(std::move(adapters)) {}

Adapter* RoutingAdapter::route(AdapterRequest::Kind kind, const std::string& name) const {
    for (const std::unique_ptr<Adapter>& adapter : adapters_)
        if (adapter->serves(kind, name)) return adapter.get();
    return nullptr;
}

AdapterReply RoutingAdapter::perform(const AdapterRequest& request) {
    Adapter* adapter = route(request.kind, nameOf(request));
    if (!adapter) {
        std::string message = fmt::format("no adapter of this run serves {} '{}'",
                                          request.kind == AdapterRequest::Kind::Ask ? "model" : "capability",
                                          nameOf(request));
        for (const std::unique_ptr<Adapter>& other : adapters_)
            if (std::string why = other->whyNotServed(request.kind, nameOf(request)); !why.empty())
                message += "; " + why;
        return AdapterReply::failure("CapabilityFailed", std::move(message));
    }
    AdapterReply reply = adapter->perform(request);
    if (reply.adapter.empty()) reply.adapter = adapter->kind();
    return reply;
}

void RoutingAdapter::replayed(const AdapterRequest& request) {
    if (Adapter* adapter = route(request.kind, nameOf(request))) adapter->replayed(request);
}

bool RoutingAdapter::serves(AdapterRequest::Kind kind, const std::string& name) const {
    return route(kind, name) != nullptr;
}

const char* RoutingAdapter::kind() const { return adapters_.empty() ? "none" : adapters_.back()->kind(); }

}  // namespace remit
