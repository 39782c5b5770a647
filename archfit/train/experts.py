"""The experts of a mixture as one grouped matrix product: rows sorted by expert, each group of
rows times its expert's matrix, in one call.

``grouped_mm(a, w, offs)``: ``a`` is (rows, in) with its rows sorted by expert, ``w`` is
(experts, in, out) and ``offs[e]`` is the end of expert e's rows. On CUDA in bf16 this is
torch's grouped GEMM (``torch.nn.functional.grouped_mm``, one kernel for every expert, as
torchtitan runs its experts); elsewhere (CPU, fp32, older torch) it is a loop of one matrix
product per expert, wrapped as the custom operator ``archfit::expert_mm``. Either way the
compiled graph holds one node whose output shape is known from its inputs, so the token counts
per expert (data) never reach the tracer: no graph break, no host sync in the traced code (the
loop itself reads ``offs`` on the host, which is free on a CPU and one sync on a GPU)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


@torch.library.custom_op("archfit::expert_mm", mutates_args=())
def expert_mm(a: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """Each group of rows of ``a`` times its expert's matrix of ``w``, one product per expert."""
    out = a.new_empty(a.shape[0], w.shape[-1])
    lo = 0
    for e, hi in enumerate(offs.tolist()):
        if hi > lo:
            torch.mm(a[lo:hi], w[e], out=out[lo:hi])
        lo = hi
    return out


@expert_mm.register_fake
def _expert_mm_shape(a: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return a.new_empty(a.shape[0], w.shape[-1])


@torch.library.custom_op("archfit::expert_mm_weight_grad", mutates_args=())
def expert_mm_weight_grad(a: torch.Tensor, g: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """The gradient of each expert's matrix: its rows of ``a`` transposed times theirs of ``g``
    (zero for an expert that got no rows)."""
    out = a.new_zeros(offs.shape[0], a.shape[1], g.shape[1])
    lo = 0
    for e, hi in enumerate(offs.tolist()):
        if hi > lo:
            torch.mm(a[lo:hi].t(), g[lo:hi], out=out[e])
        lo = hi
    return out


@expert_mm_weight_grad.register_fake
def _weight_grad_shape(a: torch.Tensor, g: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return a.new_empty(offs.shape[0], a.shape[1], g.shape[1])


def _keep_inputs(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    a, w, offs = inputs
    ctx.save_for_backward(a, w, offs)


def _expert_mm_backward(ctx, grad):  # type: ignore[no-untyped-def]
    a, w, offs = ctx.saved_tensors
    ga = expert_mm(grad, w.transpose(-2, -1), offs) if ctx.needs_input_grad[0] else None
    gw = expert_mm_weight_grad(a, grad, offs) if ctx.needs_input_grad[1] else None
    return ga, gw, None


expert_mm.register_autograd(_expert_mm_backward, setup_context=_keep_inputs)


def native_grouped(a: torch.Tensor) -> bool:
    """Whether torch's grouped GEMM takes these rows: CUDA, bf16, and a torch that has it."""
    return a.is_cuda and a.dtype == torch.bfloat16 and hasattr(F, "grouped_mm")


# each expert's group of rows is padded to a multiple of this before torch's grouped GEMM: the
# alignment its kernels want, and torchtitan's choice for bf16 (TOKEN_GROUP_ALIGN_SIZE_M = 8)
GROUP_ALIGN = 8


def padded_rows(offs: torch.Tensor, expert_of_row: torch.Tensor, align: int = GROUP_ALIGN
                ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Where each row (sorted by expert; ``expert_of_row`` its expert) goes when every
    expert's group is padded to a multiple of ``align`` rows, the padded groups' ends, and a
    bound on the padded rows that does not depend on the data (rows + experts x (align - 1)),
    so that a compiled graph keeps static shapes."""
    ends = offs.to(torch.int64)
    counts = ends - torch.cat([ends.new_zeros(1), ends[:-1]])
    padded = (counts + align - 1) // align * align
    shift = (torch.cumsum(padded, 0) - padded) - (ends - counts)  # each group's start moves
    pos = torch.arange(expert_of_row.shape[0], device=offs.device) + shift[expert_of_row]
    bound = expert_of_row.shape[0] + offs.shape[0] * (align - 1)
    return pos, torch.cumsum(padded, 0).to(torch.int32), bound


def grouped_mm(a: torch.Tensor, w: torch.Tensor, offs: torch.Tensor,
               expert_of_row: torch.Tensor | None = None) -> torch.Tensor:
    """``a``'s rows (sorted by expert, expert e's ending at ``offs[e]``) times their experts'
    matrices ``w`` (experts, in, out): torch's grouped GEMM where it runs (each group padded
    to :data:`GROUP_ALIGN` rows when ``expert_of_row`` is given), else the loop."""
    if not native_grouped(a):
        return expert_mm(a, w, offs)
    if expert_of_row is None:
        return F.grouped_mm(a, w, offs=offs)
    pos, ends, bound = padded_rows(offs, expert_of_row)
    rows = a.new_zeros(bound, a.shape[1]).index_copy(0, pos, a)
    return F.grouped_mm(rows, w, offs=ends).index_select(0, pos)
