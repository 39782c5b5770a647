"""The names of the export formats: the one list, light enough for the CLI's cold path
(``archfit recommend`` names them in --emit's choices without importing the exporters);
:data:`archfit.frameworks.FORMATS` holds one exporter per name and checks it at import."""

from __future__ import annotations

FORMAT_NAMES = ("hf-llama", "hf-gpt2", "nanogpt", "megatron", "torchtitan", "litgpt")
