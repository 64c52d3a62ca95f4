// Outside names as Remit identifiers: see imported_names.h.
#include "runtime/imported_names.h"

#include <vector>

namespace remit {

namespace {

bool isWordChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string identifierFrom(std::string_view name) {
    std::string out;
    out.reserve(name.size() + 1);
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) out += '_';
    for (char c : name) out += isWordChar(c) ? c : '_';
    return out;
}

bool matchesImportedName(std::string_view external, std::string_view remitName) {
    if (external == remitName) return true;
    std::string id = identifierFrom(external);
    if (id == remitName) return true;
    return remitName.size() == id.size() + 1 && remitName.back() == '_' && remitName.substr(0, id.size()) == id;
}

Json argumentsByImportedName(const Json& args, const Json& inputSchema) {
    Json out = Json::object();
    if (!args.is_object()) return out;
    const Json* properties = nullptr;
    if (inputSchema.is_object())
        if (auto it = inputSchema.find("properties"); it != inputSchema.end() && it->is_object()) properties = &*it;
    for (const auto& [param, value] : args.items()) {
        std::string property = param;
        if (properties && !properties->contains(param)) {
            std::vector<std::string> matches;
            for (const auto& [name, schema] : properties->items())
                if (matchesImportedName(name, param)) matches.push_back(name);
            if (matches.size() == 1) property = matches.front();
        }
        out[property] = value;
    }
    return out;
}

}  // namespace remit
