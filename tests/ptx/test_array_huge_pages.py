"""numpy's huge pages turned off on a virtual machine that hands its free memory back to the host
(``ptx.memory.huge_pages_returned_to_host``, ``array_huge_pages``), read from a sysfs tree."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuadvise.ptx.memory import array_huge_pages, huge_pages_returned_to_host

_FEATURES_LEN = 128


def _features(*bits: int) -> str:
    return "".join("1" if i in bits else "0" for i in range(_FEATURES_LEN))


def _sysfs(root: Path, *devices: tuple[str, str]) -> Path:
    """A sysfs tree with virtio devices of the given (device id, features) pairs."""
    folder = root / "bus" / "virtio" / "devices"
    folder.mkdir(parents=True)
    for i, (device, features) in enumerate(devices):
        d = folder / f"virtio{i}"
        d.mkdir()
        (d / "device").write_text(device + "\n")
        (d / "features").write_text(features + "\n")
    return root


@pytest.fixture
def numpy_setting() -> Iterator[Callable[[bool], bool]]:
    """numpy's switch, restored after the test."""
    multiarray = pytest.importorskip("numpy._core.multiarray")
    switch = multiarray._set_madvise_hugepage
    before = switch(True)
    switch(before)
    yield switch
    switch(before)


# the 2-core machine's balloon (bits 1, 2, 5: stats, deflate on OOM, free page reporting)
REPORTING = ("0x0005", _features(1, 2, 5, 32))


def test_a_balloon_with_free_page_reporting_is_found(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, ("0x0002", _features(0, 5)), REPORTING)
    assert huge_pages_returned_to_host(root) is True


@pytest.mark.parametrize(
    "devices",
    [
        (),  # a virtual machine without virtio devices
        (("0x0005", _features(1, 2, 32)),),  # a balloon that does not report free pages
        (("0x0002", _features(5, 32)), ("0x0001", _features(5))),  # bit 5 of other devices
        (("0x0005", "0101"),),  # a features string too short to hold the bit
    ],
)
def test_nothing_returned_to_the_host(tmp_path: Path, devices: tuple[tuple[str, str], ...]) -> None:
    assert huge_pages_returned_to_host(_sysfs(tmp_path, *devices)) is False


def test_no_sysfs_and_unreadable_devices(tmp_path: Path) -> None:
    assert huge_pages_returned_to_host(tmp_path / "absent") is False
    root = _sysfs(tmp_path, REPORTING)
    (root / "bus" / "virtio" / "devices" / "virtio0" / "features").unlink()
    (root / "bus" / "virtio" / "devices" / "stray").mkdir()  # no device file
    assert huge_pages_returned_to_host(root) is False


def test_turned_off_where_the_host_takes_free_pages_back(
    tmp_path: Path, numpy_setting: Callable[[bool], bool]
) -> None:
    numpy_setting(True)
    assert array_huge_pages({}, _sysfs(tmp_path, REPORTING)) is False
    assert numpy_setting(True) is False  # it was off


def test_left_alone_elsewhere_and_never_turned_on(
    tmp_path: Path, numpy_setting: Callable[[bool], bool]
) -> None:
    root = _sysfs(tmp_path, ("0x0005", _features(1, 2)))
    for setting in (True, False):
        numpy_setting(setting)
        assert array_huge_pages({}, root) is None
        assert numpy_setting(setting) is setting


def test_the_users_variable_decides(tmp_path: Path, numpy_setting: Callable[[bool], bool]) -> None:
    numpy_setting(True)
    for value in ("0", "1"):
        assert (
            array_huge_pages({"NUMPY_MADVISE_HUGEPAGE": value}, _sysfs(tmp_path / value, REPORTING))
            is None
        )
        assert numpy_setting(True) is True  # unchanged
