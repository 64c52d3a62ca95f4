#include "runtime/json_rpc.h"

#include <fmt/format.h>

namespace remit::jsonrpc {

Json errorReply(const Json& id, int code, std::string message, Json data) {
    Json error = {{"code", code}, {"message", std::move(message)}};
    if (!data.is_null()) error["data"] = std::move(data);
    return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

Json resultReply(const Json& id, Json result) {
    return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

std::optional<Json> parseMessage(std::string_view text, size_t maxDepth, Json& reply) {
    // A reply to a message that cannot be parsed still names its id when it can be read, so the
    // client can match it to the request instead of waiting for its own timeout.
    if (jsonNestsDeeperThan(text, maxDepth)) {
        reply = errorReply(recoverMessageId(text), kParseError,
                           fmt::format("Parse error: JSON nested deeper than {} levels", maxDepth));
        return std::nullopt;
    }
    Json message = text.find('\0') == std::string_view::npos ? Json::parse(replaceLoneSurrogates(text), nullptr, false)
                                                             : Json(Json::value_t::discarded);
    if (message.is_discarded()) {
        reply = errorReply(recoverMessageId(text), kParseError, "Parse error: the message is not valid JSON");
        return std::nullopt;
    }
    return message;
}

}  // namespace remit::jsonrpc
