"""The laws of mixtures of experts: ``moe-granularity`` (Krajewski et al. 2024) and
``moe-experts`` (a joint law in the expert count), on what they share (:mod:`.common`)."""

from archfit.laws.moe import experts, granularity  # noqa: F401  (registers both)
