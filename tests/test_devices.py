from __future__ import annotations

import pytest

from gpuadvise import devices
from gpuadvise.errors import UnknownDeviceError

REQUIRED = [
    "H100",
    "H100-PCIe",
    "H200",
    "A100-40GB",
    "A100-80GB",
    "V100",
    "L4",
    "L40S",
    "RTX2060",
    "RTX2080",
    "RTX3090",
    "RTX4090",
    "B200",
]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_presets_exist_and_are_complete(name):
    d = devices.preset(name)
    assert d.sm_count and d.l2_bytes and d.mem_bandwidth_gbps and d.sm_clock_mhz
    assert d.cc in devices.known_ccs()


def test_every_cc_of_the_occupancy_header_from_5_0_to_12_1():
    ccs = devices.known_ccs()
    for cc in [
        "5.0",
        "5.2",
        "5.3",
        "6.0",
        "6.1",
        "6.2",
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
        "10.0",
        "10.3",
        "12.0",
        "12.1",
    ]:
        assert cc in ccs


def test_h100_matches_the_measured_numbers():
    d = devices.preset("h100")
    assert (d.sm_count, d.l2_bytes, d.smem_per_sm) == (132, 52_428_800, 233_472)


@pytest.mark.parametrize("spelling", ["h100", "H100", "h100-sxm", "H100 SXM5", "nvidia h100"])
def test_names_are_case_insensitive(spelling):
    assert devices.preset(spelling).name == "H100"


def _suggested(e: UnknownDeviceError) -> list[str]:
    """The preset names of a "did you mean X or Y?" hint (the hint only, never the message,
    which quotes the input back)."""
    hint = e.hint or ""
    assert hint.startswith("did you mean ") and hint.endswith("?"), hint
    return hint.removeprefix("did you mean ").removesuffix("?").split(" or ")


def test_unknown_name_suggests_close_matches():
    with pytest.raises(UnknownDeviceError) as e:
        devices.preset("A10O")  # letter O for the zero
    names = _suggested(e.value)
    assert set(names) <= set(devices.preset_names())  # real presets, each once
    assert len(names) == len(set(names))
    assert {"A10", "A100-80GB"} <= set(names)
    assert e.value.message == "unknown GPU 'A10O'"
    with pytest.raises(UnknownDeviceError) as e:
        devices.preset("h1OO")
    assert _suggested(e.value) == ["H100"]


def test_unknown_name_far_from_every_preset_points_at_the_list():
    with pytest.raises(UnknownDeviceError) as e:
        devices.preset("zzzzzz")
    assert "did you mean" not in e.value.one_line()
    assert "gpuadvise devices" in (e.value.hint or "")


@pytest.mark.parametrize(
    "text,cc",
    [
        ("sm_90", "9.0"),
        ("sm_90a", "9.0"),
        ("90", "9.0"),
        ("9.0", "9.0"),
        ("compute_86", "8.6"),
        ("sm_100", "10.0"),
        ("sm_120", "12.0"),
    ],
)
def test_parse_arch(text, cc):
    assert devices.parse_arch(text) == cc


def test_arch_alone_borrows_the_reference_product_numbers():
    d = devices.for_arch("sm_90")
    assert d.name == "sm_90" and d.sm_count == 132
    bare = devices.for_arch("sm_53")
    assert bare.sm_count is None and bare.regs_per_block == 32768


def test_unknown_arch():
    with pytest.raises(UnknownDeviceError):
        devices.for_arch("sm_99")
    with pytest.raises(UnknownDeviceError):
        devices.for_arch("banana")


def test_gpu_and_arch_must_agree():
    assert devices.resolve_device("H100", "sm_90").device.name == "H100"
    with pytest.raises(UnknownDeviceError):
        devices.resolve_device("H100", "sm_80")


def test_live_names_map_to_presets():
    assert devices.from_live("NVIDIA H100 80GB HBM3", "9.0").name == "H100"
    assert devices.from_live("NVIDIA H200", "9.0").sm_count == 132
    assert devices.from_live("NVIDIA H100 PCIe", "9.0").name == "H100-PCIe"
    unknown = devices.from_live("Some Future GPU", "9.0")
    assert unknown.sm_count is None and unknown.source == "live"


def test_default_is_said_when_assumed(monkeypatch):
    monkeypatch.setattr(devices, "live_device", lambda: None)
    choice = devices.resolve_device()
    assert choice.device.name == "H100" and "assumed" in (choice.note or "")
