"""An adapters.py that fails while loading: every request must get CapabilityFailed naming the error."""
raise RuntimeError("database unreachable")
