// The embedding library's own translation unit: the code is session/embed.cpp and
// session/embed_c.cpp (linked in whole) and the layers below them; this file only gives the
// library target a source of its own.
#include "remit/remit.h"
