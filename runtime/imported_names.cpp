// Outside names as Remit identifiers: see imported_names.h.
#include "runtime/imported_names.h"

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

}  // namespace remit
