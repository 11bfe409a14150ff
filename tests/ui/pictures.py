"""Checks that a screenshot shows a rendered page: a PNG of a sane size with more than a few colours."""

from __future__ import annotations

from pathlib import Path


def check_screenshot(path: Path, *, min_width: int = 800, min_height: int = 500) -> None:
    """Raise AssertionError unless `path` is a non-blank PNG at least `min_width` x `min_height` pixels."""
    from PIL import Image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    with Image.open(path) as image:
        width, height = image.size
        assert width >= min_width and height >= min_height, f"{path} is {width}x{height}"
        assert height <= 20_000, f"{path} is {height} pixels high: the page did not lay out"
        colours = image.convert("RGB").resize((200, 200)).getcolors(maxcolors=200 * 200)
    assert colours is not None and len(colours) >= 8, f"{path} is blank ({len(colours or [])} colours)"
    most = max(count for count, _ in colours)
    assert most < 0.97 * 200 * 200, f"{path} is nearly one colour"
