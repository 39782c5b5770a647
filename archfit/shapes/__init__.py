"""The shape core: the one place where a transformer is described (:class:`Shape`, its
per-layer plan) and counted (parameters and FLOPs, each convention named). Beside it: families
of shapes at one size (:mod:`.families`), the blocks a recommendation builds
(:mod:`.architectures`) and the published shapes of known models (:mod:`.known`)."""

from archfit.shapes.architectures import (ARCHITECTURES, DEFAULT_ARCHITECTURE, Architecture,
                                          get_architecture)
from archfit.shapes.layer_plan import PLAN_SYNTAX, Layer, parse_plan, plan_indices
from archfit.shapes.shape import (ARCH_FIELDS, FLOP_CONVENTIONS, KAPLAN_TRAIN_FORMULA,
                                  LOSS_CHUNK_ELEMENTS, MAX_DIM, MAX_PLANNED_LAYERS, MLA_FIELDS,
                                  MLP_KINDS, MOE_FIELDS,
                                  NORM_KINDS, PARAMETRIZATIONS, POSITION_KINDS, SHAPE_LAW_N,
                                  SIZE_FIELDS, TRAIN_FLOPS_CONVENTION, MlpKind, NormKind,
                                  Parametrization, PositionKind, Shape, gpt2, kaplan_width,
                                  loss_chunk)

__all__ = ["ARCHITECTURES", "ARCH_FIELDS", "Architecture", "DEFAULT_ARCHITECTURE",
           "get_architecture", "FLOP_CONVENTIONS", "KAPLAN_TRAIN_FORMULA", "LOSS_CHUNK_ELEMENTS",
           "MAX_DIM", "MAX_PLANNED_LAYERS", "MLA_FIELDS", "MLP_KINDS", "MOE_FIELDS", "NORM_KINDS", "PARAMETRIZATIONS",
           "PLAN_SYNTAX", "POSITION_KINDS", "SHAPE_LAW_N", "SIZE_FIELDS",
           "TRAIN_FLOPS_CONVENTION", "Layer", "MlpKind", "NormKind", "Parametrization",
           "PositionKind", "Shape", "gpt2", "kaplan_width", "loss_chunk", "parse_plan",
           "plan_indices"]
