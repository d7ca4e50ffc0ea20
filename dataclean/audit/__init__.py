"""The audit trail: ledger and data tables as DuckDB views, stats, the manifest, ``verify``."""
from dataclean.audit.verify import VerifyReport, verify

__all__ = ["VerifyReport", "verify"]
