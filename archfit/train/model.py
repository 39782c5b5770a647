"""A decoder-only GPT in plain torch, built from a :class:`archfit.shapes.Shape`.

Pre-norm blocks, causal attention through ``F.scaled_dot_product_attention`` (flash kernels on
GPU), MLP kinds gelu / relu² / swiglu, learned or rotary positions, optional QK-norm, tied or
untied head, GQA, the shape's per-layer plan (blocks without an MLP or attention, heads per
layer) and mixtures of experts (:class:`MoE`). Its parameter count equals
``shape.params_total`` exactly (tested).

A mixture of experts (``shape.n_experts`` > 0) routes each token to its ``top_k`` experts by the
router's softmax, weights their outputs by those probabilities renormalized over the k (Mixtral;
Qwen3-MoE's ``norm_topk_prob``), and adds the shared experts; dropless (no capacity factor: every
token reaches its k experts). The routed experts run as one grouped matrix product over the
tokens sorted by expert (:mod:`archfit.train.experts`). Load balancing:

``aux-loss`` (the default)
    Switch Transformer's auxiliary loss (Fedus et al. 2022, eq. 4): ``E * sum_i f_i P_i`` per
    sparse layer, f_i the share of routed tokens expert i gets, P_i its mean router probability,
    times ``moe_aux_coef`` (0.01, Switch's). The default because it needs no state outside the
    gradient and works at any run length: the transformers implementations of Mixtral, Qwen-MoE
    and OLMoE train with it. Its value is not part of the reported loss (only its gradient is).
``bias``
    DeepSeek-V3's auxiliary-loss-free balancing (DeepSeek-AI 2024, §2.1.2): a per-expert bias
    added to the affinities for the top-k choice only (not the gate weights), moved by
    ``moe_bias_rate`` (0.001) toward balance after every training forward pass.

Experts under μP / CompleteP: each expert is an MLP of width ``d_expert`` whose matrices are
hidden matrices like a dense MLP's (init and Adam learning rate scaled with d_model, the
parametrization's rule); the router is a hidden matrix too. archfit transfers over d_model and
depth; transfer over the expert count or width (Jiang et al. 2026, arXiv 2601.20205) is not
modelled.

Parametrizations (one option, ``parametrization``):

``standard``
    GPT-2 init: N(0, 0.02) everywhere, residual output projections N(0, 0.02/sqrt(2 L)).
``mup``
    μP for width (Yang et al. 2021, Table 3 for Adam): hidden matrices N(0, σ²·base/width)
    ... i.e. std 0.02·sqrt(base_width/d_model), hidden-matrix Adam LR × base_width/d_model,
    attention logits scaled 1/head_dim (not 1/sqrt), output logits × base_width/d_model.
``completep`` / ``depth-mup``
    ``mup`` plus depth scaling of residual branches by (base_depth/L)^α, α = 1 (CompleteP,
    Dey et al. 2025) or α = 1/2 (depth-μP, Yang et al. 2023 / Bordelon et al. 2023); hidden Adam
    LR × (base_depth/L)^(1-α).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from archfit.errors import ShapeError
from archfit.shapes import PARAMETRIZATIONS, Layer, Shape, loss_chunk



@dataclass(frozen=True)
class Scaling:
    """The multipliers a parametrization applies (all 1 under ``standard``)."""

    init_std: float = 0.02
    hidden_std: float = 0.02
    residual_std: float = 0.02
    branch_mult: float = 1.0
    logit_mult: float = 1.0
    attn_scale: float | None = None  # None: 1/sqrt(head_dim)
    hidden_lr_mult: float = 1.0

    @classmethod
    def make(cls, shape: Shape, parametrization: str = "standard", base_width: int = 128,
             base_depth: int = 2) -> Scaling:
        if parametrization not in PARAMETRIZATIONS:
            raise ShapeError(f"parametrization must be one of {', '.join(PARAMETRIZATIONS)}, "
                             f"got {parametrization!r}")
        L, d = shape.n_layer, shape.d_model
        if parametrization == "standard":
            return cls(residual_std=0.02 / math.sqrt(2 * L))
        w = base_width / d
        alpha = {"mup": 0.0, "completep": 1.0, "depth-mup": 0.5}[parametrization]
        depth = base_depth / L
        hidden = 0.02 * math.sqrt(w)
        return cls(hidden_std=hidden, residual_std=hidden, branch_mult=depth ** alpha,
                   logit_mult=w, attn_scale=1.0 / shape.head_dim,
                   hidden_lr_mult=w * depth ** (1 - alpha) if alpha else w)


def _norm(kind: str, width: int, bias: bool) -> nn.Module:
    if kind == "rmsnorm":
        return nn.RMSNorm(width, eps=1e-6)
    return nn.LayerNorm(width, bias=bias)


def rotary_tables(n_ctx: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, ...]:
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    t = torch.arange(n_ctx, dtype=torch.float32)
    freqs = torch.outer(t, inv)
    return freqs.cos(), freqs.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    T = x.shape[-2]
    c, s = cos[:T].to(x.dtype), sin[:T].to(x.dtype)
    out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, s: Shape, sc: Scaling, lay: Layer):
        super().__init__()
        self.n_head, self.n_kv, self.hd = lay.heads, lay.kv_heads, s.head_dim
        q = lay.heads * s.head_dim
        self.qkv = nn.Linear(s.d_model, q + 2 * lay.kv_heads * s.head_dim,
                             bias=s.bias or s.qkv_bias)
        self.proj = nn.Linear(q, s.d_model, bias=s.bias)
        self.proj.is_residual = True  # type: ignore[attr-defined]
        self.q_norm = _norm(s.norm, s.head_dim, s.bias) if s.qk_norm else None
        self.k_norm = _norm(s.norm, s.head_dim, s.bias) if s.qk_norm else None
        self.rope = s.position == "rope"
        self.scale = sc.attn_scale

    def forward(self, x: torch.Tensor, rot: tuple[torch.Tensor, torch.Tensor] | None
                ) -> torch.Tensor:
        B, T, _ = x.shape
        C = self.n_head * self.hd
        q, k, v = self.qkv(x).split([C, self.n_kv * self.hd, self.n_kv * self.hd], dim=-1)
        q = q.view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = k.view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = v.view(B, T, self.n_kv, self.hd).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # type: ignore[misc]
        if self.rope and rot is not None:
            q, k = apply_rotary(q, *rot), apply_rotary(k, *rot)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale,
                                           enable_gqa=self.n_kv != self.n_head)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class LatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2/V3): queries from a normed latent of
    ``q_lora_rank`` (or a full projection), keys and values from a shared normed latent of
    ``kv_lora_rank``; each head's query and key are ``head_dim`` wide without positions plus
    ``qk_rope_head_dim`` with RoPE (one rope key for all heads), its value ``v_head_dim``."""

    def __init__(self, s: Shape, sc: Scaling, lay: Layer):
        super().__init__()
        H, hd, r, v = lay.heads, s.head_dim, s.qk_rope_head_dim, s.value_head_dim
        self.heads, self.hd, self.r, self.v = H, hd, r, v
        d, ql, kvr = s.d_model, s.q_lora_rank, s.kv_lora_rank
        if ql:
            self.q_a = nn.Linear(d, ql, bias=False)
            self.q_norm = _norm(s.norm, ql, False)
            self.q_b = nn.Linear(ql, H * (hd + r), bias=False)
        else:
            self.q = nn.Linear(d, H * (hd + r), bias=False)
        self.kv_a = nn.Linear(d, kvr + r, bias=False)
        self.kv_norm = _norm(s.norm, kvr, False)
        self.kv_b = nn.Linear(kvr, H * (hd + v), bias=False)
        self.proj = nn.Linear(H * v, d, bias=False)
        self.proj.is_residual = True  # type: ignore[attr-defined]
        self.kvr = kvr
        self.scale = sc.attn_scale

    def forward(self, x: torch.Tensor, rot: tuple[torch.Tensor, torch.Tensor] | None
                ) -> torch.Tensor:
        B, T, _ = x.shape
        H, hd, r, v = self.heads, self.hd, self.r, self.v
        q = self.q_b(self.q_norm(self.q_a(x))) if hasattr(self, "q_a") else self.q(x)
        q = q.view(B, T, H, hd + r).transpose(1, 2)
        latent, k_rope = self.kv_a(x).split([self.kvr, r], dim=-1)
        kv = self.kv_b(self.kv_norm(latent)).view(B, T, H, hd + v).transpose(1, 2)
        k, val = kv.split([hd, v], dim=-1)
        if r:
            q_nope, q_rope = q.split([hd, r], dim=-1)
            k_rope = k_rope.view(B, 1, T, r)
            if rot is not None:
                q_rope, k_rope = apply_rotary(q_rope, *rot), apply_rotary(k_rope, *rot)
            q = torch.cat([q_nope, q_rope], dim=-1)
            k = torch.cat([k, k_rope.expand(B, H, T, r)], dim=-1)
        y = F.scaled_dot_product_attention(q, k, val, is_causal=True, scale=self.scale)
        return self.proj(y.transpose(1, 2).reshape(B, T, H * v))


def activate(kind: str, h: torch.Tensor) -> torch.Tensor:
    """The MLP's nonlinearity on its up projection ``h`` (SwiGLU: both halves of it)."""
    if kind == "gelu":
        return F.gelu(h, approximate="tanh")
    if kind == "relu2":
        return F.relu(h).square()
    a, b = h.chunk(2, dim=-1)
    return F.silu(a) * b


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matrix products run in here: autocast's where it is on, else ``x``'s."""
    kind = x.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype


class MLP(nn.Module):
    def __init__(self, s: Shape, width: int | None = None):
        super().__init__()
        self.kind = s.mlp
        f = width or s.d_ff
        assert f is not None
        up = 2 * f if s.mlp == "swiglu" else f
        self.up = nn.Linear(s.d_model, up, bias=s.bias)
        self.down = nn.Linear(f, s.d_model, bias=s.bias)
        self.down.is_residual = True  # type: ignore[attr-defined]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(activate(self.kind, self.up(x)))


MOE_BALANCE = ("aux-loss", "bias")


class MoE(nn.Module):
    """A sparse MLP: a bias-free router over ``n_experts`` experts, each token sent to its
    ``top_k`` and to every shared expert; dropless. The routed experts' weights are stacked,
    ``up`` (experts, up width, d_model) and ``down`` (experts, d_model, d_expert), as
    ``nn.Linear`` would hold each, and run as one grouped matrix product
    (:mod:`archfit.train.experts`). Counts the tokens each expert receives while training
    (:attr:`load`), for the run's metrics. A checkpoint of the earlier layout (one ``MLP``
    module per expert, ``experts.{e}.up.weight``) loads into this one."""

    select_bias: torch.Tensor  # buffers, registered below
    load: torch.Tensor
    step_load: torch.Tensor

    def __init__(self, s: Shape, balance: str = "aux-loss", aux_coef: float = 0.01,
                 bias_rate: float = 1e-3):
        super().__init__()
        if balance not in MOE_BALANCE:
            raise ShapeError(f"moe_balance must be one of {', '.join(MOE_BALANCE)}, got "
                             f"{balance!r}")
        self.k, self.balance, self.kind = s.top_k, balance, s.mlp
        self.aux_coef, self.bias_rate = aux_coef, bias_rate
        E, d, f = s.n_experts, s.d_model, s.d_expert
        assert f is not None
        up = 2 * f if s.mlp == "swiglu" else f
        self.router = nn.Linear(d, E, bias=False)
        self.up = nn.Parameter(torch.empty(E, up, d))
        self.down = nn.Parameter(torch.empty(E, d, f))
        self.up_bias = nn.Parameter(torch.zeros(E, up)) if s.bias else None
        self.down_bias = nn.Parameter(torch.zeros(E, d)) if s.bias else None
        self.shared = nn.ModuleList(MLP(s, f) for _ in range(s.n_shared_experts))
        # DeepSeek-V3's selection bias (used by balance="bias"), and the tokens each expert got
        self.register_buffer("select_bias", torch.zeros(E))
        self.register_buffer("load", torch.zeros(E, dtype=torch.float64), persistent=False)
        # the tokens each expert got since the last optimizer step (balance="bias")
        self.register_buffer("step_load", torch.zeros(E), persistent=False)
        self.aux: torch.Tensor | None = None  # the last training pass's balancing loss
        self._register_load_state_dict_pre_hook(_stack_expert_modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = torch.softmax(self.router(x).float(), dim=-1)
        pick = probs + self.select_bias if self.balance == "bias" else probs
        top = pick.topk(self.k, dim=-1).indices
        gate = probs.gather(-1, top)
        gate = gate / gate.sum(-1, keepdim=True)
        counts = torch.zeros_like(self.select_bias, dtype=torch.long).scatter_add_(
            0, top.flatten(), torch.ones_like(top.flatten()))
        out = self.routed(x, top, gate, counts)
        for expert in self.shared:
            out = out + expert(x)
        if self.training:
            self._balance(probs, counts)
        return out.reshape(shape)

    def routed(self, x: torch.Tensor, top: torch.Tensor, gate: torch.Tensor,
               counts: torch.Tensor) -> torch.Tensor:
        """The routed experts' output: every (token, choice) pair sorted by expert, the
        experts' up and down projections as grouped products over those rows, each row weighted
        by its gate and summed back into its token."""
        from archfit.train.experts import grouped_mm

        expert = top.flatten()
        order = expert.argsort(stable=True)
        token = order // self.k
        offs = counts.cumsum(0).to(torch.int32)
        dt = compute_dtype(x)
        rows = expert[order]  # each sorted row's expert
        h = grouped_mm(x[token].to(dt), self.up.to(dt).transpose(1, 2), offs, rows)
        if self.up_bias is not None:
            h = h + self.up_bias[rows].to(h.dtype)
        y = grouped_mm(activate(self.kind, h), self.down.to(dt).transpose(1, 2), offs, rows)
        if self.down_bias is not None:
            y = y + self.down_bias[rows].to(y.dtype)
        y = y * gate.flatten()[order, None].to(y.dtype)
        return torch.zeros(x.shape, dtype=y.dtype, device=x.device).index_add_(0, token, y)

    def _balance(self, probs: torch.Tensor, counts: torch.Tensor) -> None:
        E = probs.shape[-1]
        self.load += counts.detach().to(self.load.dtype)
        share = counts.float() / (probs.shape[0] * self.k)
        if self.balance == "aux-loss":  # Switch: E * sum_i f_i P_i (f has no gradient)
            self.aux = self.aux_coef * E * (share.detach() * probs.mean(0)).sum()
        else:  # DeepSeek-V3's bias moves once per optimizer step (update_selection_bias)
            self.aux = None
            self.step_load += counts.detach().to(self.step_load.dtype)

    @torch.no_grad()
    def update_selection_bias(self) -> None:
        """DeepSeek-V3's auxiliary-loss-free balancing, once per optimizer step (an optimizer
        step hook calls it: :func:`selection_bias_hook`): raise the selection bias of the
        experts that got fewer tokens than the mean since the last step, lower the others'."""
        if self.balance != "bias" or not bool(self.step_load.sum() > 0):
            return
        share = self.step_load / self.step_load.sum()
        self.select_bias += self.bias_rate * torch.sign(share.mean() - share)
        self.step_load.zero_()


def selection_bias_hook(model: nn.Module) -> Callable[..., None]:
    """An optimizer step post-hook that moves every MoE layer's selection bias (balance="bias")
    after the weights step, outside the forward pass."""
    layers = [m for m in model.modules() if isinstance(m, MoE) and m.balance == "bias"]

    def hook(*_: Any) -> None:
        for m in layers:
            m.update_selection_bias()
    return hook


def _stack_expert_modules(state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
    """Load a checkpoint written with one module per expert (``experts.{e}.up.weight``, ...)
    into the stacked layout: each kind of weight stacked over the experts in order."""
    old = f"{prefix}experts."
    if not any(k.startswith(old) for k in state_dict):
        return
    n = 1 + max(int(k[len(old):].split(".")[0]) for k in state_dict if k.startswith(old))
    for name, key in (("up", "up.weight"), ("down", "down.weight"), ("up_bias", "up.bias"),
                      ("down_bias", "down.bias")):
        parts = [state_dict.pop(f"{old}{e}.{key}", None) for e in range(n)]
        if all(p is not None for p in parts):
            state_dict[prefix + name] = torch.stack(parts)  # type: ignore[arg-type]


class Block(nn.Module):
    """One pre-norm block of the shape's plan: a block without attention (or without an MLP)
    has no such module and no norm for it, so it holds none of their parameters."""

    def __init__(self, s: Shape, sc: Scaling, lay: Layer, **moe: Any):
        super().__init__()
        self.ln1 = _norm(s.norm, s.d_model, s.bias) if lay.attn else None
        self.attn = ((LatentAttention if s.mla else Attention)(s, sc, lay) if lay.attn
                     else None)
        self.ln2 = _norm(s.norm, s.d_model, s.bias) if lay.mlp else None
        self.mlp: nn.Module | None = None
        if lay.mlp:
            self.mlp = MoE(s, **moe) if lay.sparse else MLP(s)
        self.branch = sc.branch_mult

    def forward(self, x: torch.Tensor, rot: tuple[torch.Tensor, torch.Tensor] | None
                ) -> torch.Tensor:
        if self.attn is not None:
            a = self.attn(self.ln1(x), rot)  # type: ignore[misc]
            x = x + (self.branch * a if self.branch != 1.0 else a)
        if self.mlp is not None:
            m = self.mlp(self.ln2(x))  # type: ignore[misc]
            x = x + (self.branch * m if self.branch != 1.0 else m)
        return x


# logits per chunk of the output layer's fused loss: shapes.loss_chunk (128 MiB in fp32: 640
# tokens at vocab 50257); smaller chunks make the matmuls and weight-gradient updates slower,
# larger ones cost memory; below this bound on every |logit| of a chunk, its softmax is taken
# from exp(logits) directly (_LinearCrossEntropy.forward says why that is safe)
EXP_DIRECT_BOUND = 30.0


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``mult * x @ w.T`` against ``targets``, computed in chunks of
    tokens, with its gradients computed in the same pass (the loss is the graph's last node, so
    the gradient of the logits, softmax - onehot, is known in the forward pass already). Neither
    the full fp32 logits nor their softmax are ever materialized: the output layer costs its
    three matmuls and a chunk of memory. Logits are computed in the input dtype (bf16 under
    autocast) and reduced in fp32. The gradients are summed unscaled and scaled once, by
    ``mult / tokens`` times the incoming gradient, in the backward pass."""

    @staticmethod
    def forward(ctx, x, w, targets, mult, chunk, scratch):  # type: ignore[no-untyped-def]
        n = x.shape[0]
        gx = torch.empty_like(x)
        gw = torch.empty(w.shape, dtype=torch.float32, device=w.device)
        total = torch.zeros((), dtype=torch.float32, device=x.device)
        wc = w.to(x.dtype)
        xm = x * mult if mult != 1.0 else x  # (tokens, d): cheaper to scale than the logits
        # the logits transposed, (vocab, tokens): on CPU this product runs ~1.5x faster than
        # (tokens, vocab) at a small width, and each token's softmax runs down its column; one
        # buffer for all chunks, kept in ``scratch`` from call to call where one is given (a
        # fresh buffer costs its page faults on CPU: ~3% of a training step at 4x256)
        size = (w.shape[0], min(chunk, n))
        buf = scratch.get("logits") if scratch is not None else None
        if buf is None or tuple(buf.shape) != size or buf.dtype != x.dtype or \
                buf.device != x.device:
            buf = torch.empty(size, dtype=x.dtype, device=x.device)
            if scratch is not None:
                scratch["logits"] = buf
        in_place = x.device.type == "cpu"  # torch.softmax(out=its input) is checked on CPU
        # each token's largest |logit| is at most |x_t| max_v |w_v| (Cauchy-Schwarz). Below 30,
        # exp(logits), their sum over the vocabulary, its reciprocal and the products below stay
        # far inside fp32's normal range, so the softmax's max and normalization passes over the
        # chunk can go: exp in place, and 1/sum and the onehot onto the small products instead.
        # (fp32 only: in bf16, exp(logits) / sum - onehot, taken after the product, would lose a
        # confident token's small gradient to rounding.) Early in training and at small widths
        # every token is below it; past it, the softmax.
        limit = EXP_DIRECT_BOUND if x.dtype == torch.float32 else -math.inf
        bound = torch.linalg.vector_norm(xm, dim=1, dtype=torch.float32) * \
            torch.linalg.vector_norm(wc, dim=1, dtype=torch.float32).amax()
        for i in range(0, n, chunk):
            xs, ts = x[i:i + chunk], targets[i:i + chunk]
            logits = (torch.mm(wc, xm[i:i + chunk].t(), out=buf) if len(xs) == buf.shape[1]
                      else torch.mm(wc, xm[i:i + chunk].t())).float()
            cols = torch.arange(len(ts), device=x.device)
            target = logits[ts, cols]
            if bool(bound[i:i + chunk].amax() < limit):  # one pass: exp in place
                z = logits.exp_().sum(dim=0)
                total += (z.log() - target).sum()
                g, r = logits.to(x.dtype), z.reciprocal()[:, None]  # g: exp(logits), unscaled
            else:
                # one fused kernel down each column (max, exp-sum, normalize): ~25% faster on
                # CPU than separate max, subtract, exp, sum and scale passes over the chunk
                p = torch.softmax(logits, 0, out=logits) if in_place else torch.softmax(logits, 0)
                pt = p[ts, cols]
                lost = pt < torch.finfo(torch.float32).tiny  # the target's probability underflowed
                if bool(lost.any()):  # its loss from the logits themselves: log-sum-exp - target
                    rows = (xm[i:i + chunk][lost] @ wc.t()).float()
                    total += (rows.logsumexp(dim=1) - target[lost]).sum()
                    total -= pt[~lost].log().sum()
                else:
                    total -= pt.log().sum()
                p[ts, cols] -= 1.0  # softmax - onehot
                g, r = p.to(x.dtype), None
            gxc = gx[i:i + chunk]
            torch.mm(g.t(), wc, out=gxc)
            xg = xs.float() if r is None else xs.float() * r  # .float() is free on fp32
            if i == 0:
                torch.mm(g.float(), xg, out=gw)
            else:
                gw.addmm_(g.float(), xg)
            if r is not None:  # softmax - onehot, from exp(logits) / its sum
                gxc.mul_(r.to(gxc.dtype)).sub_(wc[ts])
                gw.index_add_(0, ts, xs.float(), alpha=-1.0)
        ctx.save_for_backward(gx, gw)
        ctx.w_dtype, ctx.scale = w.dtype, mult / n
        return total / n

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        gx, gw = ctx.saved_tensors
        grad = grad * ctx.scale
        # the buffers are this call's own: scale them in place (no second weight-sized copy)
        return gx.mul_(grad.to(gx.dtype)), gw.mul_(grad).to(ctx.w_dtype), None, None, None, None


def linear_cross_entropy(x: torch.Tensor, w: torch.Tensor, targets: torch.Tensor,
                         mult: float = 1.0, chunk: int | None = None,
                         scratch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """``F.cross_entropy(mult * x @ w.T, targets)`` (mean over tokens) without materializing
    the logits; x is (tokens, d), w is (vocab, d); ``chunk`` tokens at a time (default
    :func:`archfit.shapes.loss_chunk`). ``scratch``, a dict the caller owns, keeps the chunk's
    logits buffer from one call to the next (one caller at a time: it is overwritten)."""
    chunk = chunk or loss_chunk(w.shape[0])
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
        return _LinearCrossEntropy.apply(x, w, targets, mult, chunk, scratch)
    total = torch.zeros((), dtype=torch.float32, device=x.device)
    for i in range(0, x.shape[0], chunk):
        logits = (x[i:i + chunk] @ w.to(x.dtype).t()).float()
        if mult != 1.0:
            logits.mul_(mult)
        total += F.cross_entropy(logits, targets[i:i + chunk], reduction="sum")
    return total / x.shape[0]


class GPT(nn.Module):
    """The model. ``forward(idx, targets=None)`` returns (logits, None), or with targets
    (logits or None, mean cross-entropy).

    The loss: in eager mode on a CPU, the output layer fused with its loss
    (:func:`linear_cross_entropy`: no logits materialized, about 1.5x faster there). Compiled,
    or on a GPU, the logits in the compute dtype (bf16 under autocast) and ``F.cross_entropy``
    in fp32, which the compiler fuses and which keeps the step one graph: the fused loss
    decides per chunk on the host, a sync and a graph break each. ``fused_loss`` True or False
    forces one or the other (None: that choice)."""

    fused_loss: bool | None = None

    def __init__(self, shape: Shape, parametrization: str = "standard", base_width: int = 128,
                 base_depth: int = 2, moe_balance: str = "aux-loss", moe_aux_coef: float = 0.01):
        super().__init__()
        self.shape = shape
        self.parametrization = parametrization
        self.scaling = sc = Scaling.make(shape, parametrization, base_width, base_depth)
        self._loss_scratch: dict[str, torch.Tensor] = {}  # the fused loss's logits buffer
        s = shape
        self.tok_emb = nn.Embedding(s.vocab_size, s.d_model)
        self.pos_emb = nn.Embedding(s.n_ctx, s.d_model) if s.position == "learned" else None
        moe = {"balance": moe_balance, "aux_coef": moe_aux_coef} if s.moe else {}
        self.blocks = nn.ModuleList(Block(s, sc, lay, **moe) for lay in s.layers())
        self.ln_f = _norm(s.norm, s.d_model, s.bias)
        self.head = None if s.tied_embeddings else nn.Linear(s.d_model, s.vocab_size, bias=False)
        if s.position == "rope":  # latent attention: only each head's rope part rotates
            cos, sin = rotary_tables(s.n_ctx, s.qk_rope_head_dim if s.mla else s.head_dim)
            self.register_buffer("rot_cos", cos, persistent=False)
            self.register_buffer("rot_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        sc = self.scaling
        for m in self.modules():
            if isinstance(m, MoE):  # the stacked experts, as each expert's nn.Linear would be
                nn.init.normal_(m.up, 0.0, sc.hidden_std)
                nn.init.normal_(m.down, 0.0, sc.residual_std)
            elif isinstance(m, nn.Linear):
                std = sc.residual_std if getattr(m, "is_residual", False) else sc.hidden_std
                if m is self.head:
                    std = sc.init_std
                nn.init.normal_(m.weight, 0.0, std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, sc.init_std)

    def hidden_matrices(self) -> list[nn.Parameter]:
        """The weight matrices inside the blocks (what μP rescales and Muon orthogonalizes):
        2-D, and the mixtures' stacked experts (3-D, a matrix per expert)."""
        return [p for n, p in self.blocks.named_parameters() if p.ndim >= 2]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def moe_layers(self) -> list[MoE]:
        return [m for m in self.modules() if isinstance(m, MoE)]

    def expert_load(self) -> list[list[float]]:
        """Each sparse layer's share of the routed tokens per expert, counted over the training
        passes since the model was built (1 / n_experts each when balanced)."""
        out = []
        for m in self.moe_layers():
            total = float(m.load.sum())
            out.append([float(v) / total if total else 0.0 for v in m.load])
        return out

    def _with_balance(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss whose gradient carries the experts' balancing loss and whose value is the
        cross-entropy alone: ``loss + aux - aux.detach()`` (so the reported train loss is the
        model's, as the validation loss is)."""
        aux = [b.mlp.aux for b in self.blocks if self.training and isinstance(b.mlp, MoE)
               and b.mlp.aux is not None]
        if not aux:
            return loss
        total = torch.stack(aux).sum()
        return loss + (total - total.detach()).to(loss.dtype)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        B, T = idx.shape
        if T > self.shape.n_ctx:
            raise ValueError(f"sequence of {T} tokens exceeds the context {self.shape.n_ctx}")
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(T, device=idx.device))
        rot = (self.rot_cos, self.rot_sin) if self.shape.position == "rope" else None
        for b in self.blocks:
            x = b(x, rot)
        x = self.ln_f(x)
        w = self.tok_emb.weight if self.head is None else self.head.weight
        mult = self.scaling.logit_mult
        eager_cpu = idx.device.type == "cpu" and not torch.compiler.is_compiling()
        if targets is not None and (eager_cpu if self.fused_loss is None else self.fused_loss):
            # in the compute dtype, as autocast would run the output layer; the logits buffer
            # is kept between steps on an eager CPU, where a fresh one costs its page faults
            x = x.to(compute_dtype(x))
            loss = linear_cross_entropy(x.reshape(B * T, -1), w, targets.reshape(-1), mult,
                                        scratch=self._loss_scratch if eager_cpu else None)
            return None, self._with_balance(loss)
        logits = F.linear(x, w)
        if mult != 1.0:
            logits = logits * mult
        loss = None
        if targets is not None:
            loss = self._with_balance(F.cross_entropy(logits.float().view(-1, logits.size(-1)),
                                                      targets.reshape(-1)))
        return logits, loss
