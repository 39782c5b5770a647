"""Parquet storage of sweep results (schema versions and their checks)."""

from __future__ import annotations

from typing import Any

from archfit.errors import FitInputError

SCHEMA_VERSION = 1


def check_schema_version(df: Any, path: str) -> None:
    """Accept files of this schema or older (every version so far is readable); refuse newer."""
    versions = set(int(v) for v in df["schema_version"].drop_nulls().unique().to_list())
    newer = [v for v in versions if v > SCHEMA_VERSION]
    if newer:
        raise FitInputError(f"{path}: written with archfit schema {max(newer)}, newer than this "
                            f"archfit reads ({SCHEMA_VERSION}); upgrade archfit")
