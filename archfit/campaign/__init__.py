"""``archfit campaign``: design → train → fit → recommend, round after round, until the answer
is informative, its interval narrow enough, the budget spent or the rounds run out."""

from archfit.campaign.core import (LEDGER, CampaignError, Spec, Status, describe, load,
                                   read_ledger, run, status, summary)
from archfit.campaign.report import is_report, write_report

__all__ = ["LEDGER", "CampaignError", "Spec", "Status", "describe", "is_report", "load",
           "read_ledger", "run", "status", "summary", "write_report"]
