"""plot.png: the job's output folder holds a PNG of every disk before and after, that decodes
to the size the chart is drawn at."""

from __future__ import annotations

import io
import struct
from pathlib import Path

from PIL import Image

from jbod_spark import plan_directory_balance
from jbod_spark.plot import BAR_LIMIT, DPI, HEIGHT_IN, plot_png, width_inches
from jbod_spark.spark_job import write_plan
from jbod_spark.synthetic import synthetic_cluster
from tests.unit.test_planner import demo_snapshot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def ihdr_size(data: bytes) -> tuple[int, int]:
    """Width and height from the PNG's first chunk (IHDR), as the format defines them."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    w, h = struct.unpack(">II", data[16:24])
    return int(w), int(h)


def test_write_plan_writes_a_png_of_every_disk(tmp_path: Path) -> None:
    p = plan_directory_balance(demo_snapshot())
    files = write_plan(p, tmp_path)
    path = Path(files["plot"])
    assert path == tmp_path / "plot.png"
    data = path.read_bytes()
    expected = (round(width_inches(len(p.report.dirs)) * DPI), round(HEIGHT_IN * DPI))
    assert ihdr_size(data) == expected
    with Image.open(path) as im:
        im.load()  # decodes every pixel: a truncated or corrupt file raises here
        assert im.size == expected
        # a drawn chart, not a blank canvas: grey (before), blue (after) and red (threshold)
        colours = {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20) or []}
    assert (0x9E, 0x9E, 0x9E) in colours
    assert (0x1F, 0x77, 0xB4) in colours
    assert (0xD6, 0x27, 0x28) in colours


def test_a_large_cluster_is_drawn_as_markers_at_a_bounded_width() -> None:
    a = synthetic_cluster(3, 40, 12, 1800)
    p = plan_directory_balance(a)
    assert len(p.report.dirs) > BAR_LIMIT
    w, h = ihdr_size(plot_png(p.report))
    assert (w, h) == (round(width_inches(len(p.report.dirs)) * DPI), round(HEIGHT_IN * DPI))
    assert w <= 24 * DPI


def test_a_report_without_disks_still_draws() -> None:
    """Plans built without per-disk rows (``build_plan(with_dirs=False)``) have an empty chart."""
    report = plan_directory_balance(demo_snapshot()).report.model_copy(update={"dirs": []})
    assert ihdr_size(plot_png(report)) == (round(width_inches(0) * DPI), round(HEIGHT_IN * DPI))


def test_the_plot_shows_each_broker_s_share_under_the_disks(tmp_path: Path) -> None:
    """The lower row: bytes, replicas and leaders per broker before and after, with the mean
    after (green, dashed); a report without brokers leaves those panels empty."""
    p = plan_directory_balance(demo_snapshot())
    with Image.open(io.BytesIO(plot_png(p.report))) as im:
        rgb = im.convert("RGB")
        w, h = rgb.size
        lower = rgb.crop((0, int(h * 0.62), w, h))
        colours = {c for _, c in lower.getcolors(maxcolors=1 << 20) or []}
    assert (0x9E, 0x9E, 0x9E) in colours and (0x1F, 0x77, 0xB4) in colours
    assert (0x2C, 0xA0, 0x2C) in colours
    empty = p.report.model_copy(update={"brokers": []})
    assert ihdr_size(plot_png(empty)) == ihdr_size(plot_png(p.report))
