"""The one table of accelerators archfit knows: memory, dense bf16 peak FLOP/s and memory
bandwidth from the vendors' data sheets. archfit.train.memory (what fits), archfit.train.perf (how fast) and
the trainer (MFU of a measured run) all read it."""

from __future__ import annotations

from typing import NamedTuple

from archfit.errors import ArchfitError


class Device(NamedTuple):
    """An accelerator's data sheet: memory, dense bf16 peak FLOP/s and memory bandwidth."""

    key: str
    name: str
    memory_gib: float
    peak_flops: float
    bandwidth: float  # bytes/s
    source: str
    link_bandwidth: float = 0.0  # bytes/s each way to the other GPUs of a node (NVLink)
    network_bandwidth: float = 0.0  # bytes/s each way to GPUs of other nodes (its NIC)


GPUS_PER_NODE = 8  # an HGX/DGX node: what NVLink joins

# vendor data sheets (dense, no sparsity): the one table of devices in archfit
DEVICES: dict[str, Device] = {d.key: d for d in (
    # NVLink: 900 GB/s (H100, H200) and 600 GB/s (A100) both ways together, half each way; the
    # network: one InfiniBand NIC per GPU in DGX H100/H200 (NDR 400 Gb/s) and DGX A100 (HDR
    # 200 Gb/s), 50 and 25 GB/s each way
    Device("h100", "H100 SXM5 80GB", 80.0, 989e12, 3.35e12, "NVIDIA H100 data sheet", 450e9,
           50e9),
    Device("h200", "H200 SXM 141GB", 141.0, 989e12, 4.8e12, "NVIDIA H200 data sheet", 450e9,
           50e9),
    Device("a100", "A100 SXM4 80GB", 80.0, 312e12, 2.039e12, "NVIDIA A100 data sheet", 300e9,
           25e9),
    Device("a100-40gb", "A100 SXM4 40GB", 40.0, 312e12, 1.555e12, "NVIDIA A100 data sheet",
           300e9, 25e9),
)}
# the substring torch.cuda.get_device_name() holds for each (MFU of a measured run)
DEVICE_NAME_KEYS = (("H200", "h200"), ("H100", "h100"), ("A100", "a100"))


def device(name: str) -> Device:
    if not str(name).strip():
        raise ArchfitError(f"--gpu is empty; choose one of {', '.join(DEVICES)}")
    try:
        return DEVICES[str(name).lower()]
    except KeyError:
        raise ArchfitError(f"unknown accelerator {name!r}; choose one of "
                           f"{', '.join(DEVICES)}") from None


def device_key(torch_name: str) -> str | None:
    """The :data:`DEVICES` key of a CUDA device name (``NVIDIA H100 80GB HBM3`` -> h100)."""
    return next((k for sub, k in DEVICE_NAME_KEYS if sub in torch_name), None)
