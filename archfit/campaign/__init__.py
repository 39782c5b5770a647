"""``archfit campaign``: design → train → fit → recommend, round after round, until the answer
is informative, its interval narrow enough, the budget spent or the rounds run out.

A campaign is a TOML spec (:mod:`.spec`, :func:`load`) and a folder holding its ledger
(:mod:`.ledger`) and one folder per round: the round's sweep spec, its run folders, its
collected runs, its fit and its design figure. :func:`run` runs or resumes it (:mod:`.loop`),
:func:`status` says where it stands (:mod:`.status`) and :func:`write_report` writes one HTML
page of it (:mod:`.report`)."""

from archfit.campaign.ledger import LEDGER, Change, Ledger, Round, RoundState
from archfit.campaign.loop import Prepared, prepare, run
from archfit.campaign.report import is_report, write_report
from archfit.campaign.spec import CampaignError, Spec, Stop, load
from archfit.campaign.status import Status, describe, status, summary

__all__ = ["LEDGER", "CampaignError", "Change", "Ledger", "Prepared", "Round", "RoundState",
           "Spec", "Status", "Stop", "describe", "is_report", "load", "prepare", "run",
           "status", "summary", "write_report"]
