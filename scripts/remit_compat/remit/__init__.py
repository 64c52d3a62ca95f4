"""Compatibility modules for prototype-style `adapters.py` files run by `remit-py-adapter` (--live).

Only what host adapter code imports is provided: `remit.broker` (AdapterResult, CallContext),
`remit.rterrors` (the runtime error classes), `remit.stdadapters` (RootedFiles, Ledger, http_get,
run_pytest) and `remit.models` (render_prompt). Standard library only.
"""
