#!/usr/bin/env python3
"""scripts/symbol-order's own logic, without valgrind: which functions it reads from a callgrind
output file (names are written once and then referred to by number, across `fn`, `cfn`, `ob` and
`cob` lines; only the tools' own functions count) and the order it writes them in. A wrong parse
would not fail the build — it would silently leave functions out of cmake/tools.order, which costs
start-up and memory (docs/performance.md, "The tools' executed functions first")."""
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_script():
    path = os.path.join(ROOT, "scripts", "symbol-order")
    loader = importlib.machinery.SourceFileLoader("symbol_order", path)
    spec = importlib.util.spec_from_loader("symbol_order", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


symbol_order = load_script()

# A callgrind file in the compressed form valgrind writes (--compress-strings is the default):
# the first mention of an object or function gives "(number) name", later ones "(number)" alone,
# and a name may first appear as a callee (cfn) before it has costs of its own (fn).
CALLGRIND = """\
version: 1
creator: callgrind-3.19.0
cmd: remitvm run startup.rbc
events: Ir
ob=(1) /work/build/release/cli/remitvm
fl=(1) ???
fn=(1) _ZN5remit4mainEv
5 10
cob=(1)
cfn=(3) _ZN5remit7decode2Ev
calls=1 0
6 30
cob=(2) /lib/x86_64-linux-gnu/libc.so.6
cfi=(2) ???
cfn=(2) memcpy
calls=1 0
5 20
fn=(4) _ZN5remit5spillEv'2
3 4
fn=(5) 0x0000000000012345
1 1
ob=(2)
fn=(2)
1 5
fn=(6) _ZN5remit9notOursEv
1 1
ob=(1)
fn=(3)
2 7
fn=(7) (below main)
1 1
ob=(3) /work/build/release/cli/remitvm.debug
fn=(8) _ZN5remit6debugEv
1 1
"""


class ExecutedFunctions(unittest.TestCase):
    def test_reads_compressed_names_of_the_tools_own_functions(self):
        with tempfile.NamedTemporaryFile("w", suffix=".callgrind", delete=False) as f:
            f.write(CALLGRIND)
        try:
            ran = symbol_order.executed_functions(f.name)
        finally:
            os.unlink(f.name)
        # A call into libc (cob) does not change whose functions the following fn lines are.
        # memcpy and notOurs ran in libc; decode2 is named first as a callee and later has costs
        # under its number alone; the recursion mark 's'2 is not part of the symbol; addresses
        # and callgrind's "(below main)" are not symbols; remitvm.debug is not a tool.
        self.assertEqual(ran, {"_ZN5remit4mainEv", "_ZN5remit7decode2Ev", "_ZN5remit5spillEv"})


class Order(unittest.TestCase):
    def test_first_run_first_then_most_shared_then_name(self):
        runs = [{"a", "b"}, {"b", "c", "d"}, {"d", "e"}, {"c", "f", "d"}]
        # Run 0 brings a (1 run) and b (2 runs): b first. Run 1 brings d (3 runs) and c (2 runs).
        # Run 2 brings e; run 3 brings f.
        self.assertEqual(symbol_order.order(runs), ["b", "a", "d", "c", "e", "f"])

    def test_ties_are_broken_by_name_so_the_file_is_stable(self):
        self.assertEqual(symbol_order.order([{"z", "y", "x"}]), ["x", "y", "z"])
        self.assertEqual(symbol_order.order([]), [])


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2))
