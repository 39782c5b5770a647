"""A module proxy that imports on first use, so cold CLI paths (``archfit recommend``) that
never touch numpy do not pay for importing it."""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def lazy(name: str) -> Any:
    return LazyModule(name)
