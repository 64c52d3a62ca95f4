// Out-of-line parts of runtime/value.h (the Value handle itself is all inline, for the VM's
// dispatch loop; objects are freed by the Heap, in heap.cpp).
#include "runtime/value.h"

namespace remit {

std::string_view kindName(ValueKind kind) {
    switch (kind) {
        case ValueKind::Unit:
            return "Unit";
        case ValueKind::Bool:
            return "Bool";
        case ValueKind::Int:
            return "Int";
        case ValueKind::Float:
            return "Float";
        case ValueKind::Str:
            return "Str";
        case ValueKind::List:
            return "List";
        case ValueKind::Record:
            return "Record";
    }
    return "?";
}

}  // namespace remit
