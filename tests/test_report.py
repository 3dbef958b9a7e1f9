"""The HTML report renders in a real headless browser: its images decode and its tables are there."""

import json
import re
import shutil
import subprocess

import pytest

from rooflab import cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",
]


def _report(quick_result, tmp_path, extra=()):
    out = tmp_path / "report.html"
    assert cli.main(["report", str(quick_result), *extra, "-o", str(out)]) == 0
    return out


@pytest.mark.slow
def test_report_is_self_contained(quick_result, tmp_path):
    text = _report(quick_result, tmp_path).read_text()
    assert "<table" in text and "data:image/png;base64," in text
    assert not re.search(r"""(src|href)=["']https?://""", text), "the page must not load anything from the network"


@pytest.mark.slow
def test_report_rejects_other_schema(quick_result, tmp_path, capsys):
    bad = tmp_path / "old.json"
    d = json.loads(quick_result.read_text())
    d["schema_version"] = 0
    bad.write_text(json.dumps(d))
    assert cli.main(["report", str(quick_result), str(bad), "-o", str(tmp_path / "r.html")]) == 2
    assert "schema_version 0" in capsys.readouterr().err


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")
@pytest.mark.slow
def test_report_renders_in_headless_chromium(quick_result, tmp_path):
    other = tmp_path / "other.json"
    d = json.loads(quick_result.read_text())
    d["machine"]["id"] = "other-machine"
    for c in d["ceilings"]:
        c["value"] *= 0.8
    other.write_text(json.dumps(d))
    page = _report(quick_result, tmp_path, extra=[str(other)])
    prof = tmp_path / "profile"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={prof}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r"<title>rooflab-report rendered images=(\d+)/(\d+) tables=(\d+) rows=(\d+)</title>", dom.stdout)
    assert m, dom.stdout[:500]
    ok, total, tables, rows = map(int, m.groups())
    assert total >= 5 and ok == total  # comparison + 2 x (roofline, staircase), all decoded
    assert tables >= 7 and rows >= 40
    assert 'data-rendered="yes"' in dom.stdout
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={prof}", "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    import matplotlib.image as mpimg

    px = mpimg.imread(shot)
    assert px.std() > 0.05  # not a blank page: text, tables and charts were painted


def test_family_summary_names_each_variant_once_and_fits_a_narrow_terminal(monkeypatch, capsys):
    """The run's terminal table: the suite's prefix said once in the title, each case label
    without the variant name it repeats, and no name cut off in an 80-column shell."""
    from rooflab import commands

    name = "cpu.elementwise.bias_gelu_add.02-numba-fused"
    recs = [
        {"variant": "cpu.stream.copy", "label": "dram/float32/2T stream copy", "gbps": {"median": 29.0}},
        {"variant": name, "label": f"dram/float32/2T {name}", "gflops": {"median": 9.2}},
    ]
    for r in recs:
        r["status"] = "ok"
    monkeypatch.setenv("COLUMNS", "80")
    data = {"suite": "elementwise", "machine": {"id": "m"}, "device": "cpu", "records": recs}
    commands._family_summary(data)
    out = capsys.readouterr().out
    assert "variants cpu.elementwise.*" in out
    assert "…" not in out  # folded, never cut
    assert "bias_gel" in out and "cpu.elementwise.b" not in out  # the prefix is not repeated per row
    assert out.count("numba-fused") == 1 and "stream copy" in out  # the case drops the variant's name
    assert max(len(line) for line in out.splitlines()) <= 80


def test_pct_of_library_pairs_a_rung_with_its_own_knob_but_never_another_case():
    """softmax's own rung carries ``block`` (a tuning knob numpy's lacks): still the same case. A
    parameter both carry (layout) must agree: NHWC is never compared with NCHW's library."""
    from rooflab import family_report

    def rec(variant, params, gbps, library=False):
        shape = {"rows": 8, "cols": 512}
        return {"variant": variant, "status": "ok", "shape": shape, "dtype": "float32", "threads": 2,
                "params": params, "gbps": {"median": gbps}, "library": library}  # fmt: skip

    recs = [
        rec("cpu.elementwise.softmax.00-numpy", {}, 4.0, library=True),
        rec("cpu.elementwise.softmax.01-numba", {"block": 16384}, 30.0),
        rec("cpu.elementwise.batchnorm.00-numpy", {"layout": "NCHW"}, 10.0, library=True),
        rec("cpu.elementwise.batchnorm.01-numba", {"layout": "NHWC", "stream": True}, 40.0),
    ]
    family_report.add_pct_of_library(recs)
    assert recs[1]["pct_of_library"] == pytest.approx(750.0)
    assert "pct_of_library" not in recs[3]
