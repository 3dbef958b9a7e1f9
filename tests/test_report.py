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
    from rooflab.commands import run_tables

    name = "cpu.elementwise.bias_gelu_add.02-numba-fused"
    recs = [
        {"variant": "cpu.stream.copy", "label": "dram/float32/2T stream copy", "gbps": {"median": 29.0}},
        {"variant": name, "label": f"dram/float32/2T {name}", "gflops": {"median": 9.2}},
    ]
    for r in recs:
        r["status"] = "ok"
    monkeypatch.setenv("COLUMNS", "80")
    data = {"suite": "elementwise", "machine": {"id": "m"}, "device": "cpu", "records": recs}
    run_tables.family_table(data)
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


def test_every_gemm_rung_gets_pct_of_library_and_the_table_a_threads_column():
    """gemm's rungs 01-03 declare no op (they compute the family library's): they were shown '-'.
    The library and 05 run at 1 and 2 threads: the threads column tells their rows apart."""
    from rooflab import family_report

    def rec(variant, threads, gflops, library=False):
        return {"variant": variant, "status": "ok", "shape": {"M": 128, "N": 128, "K": 128, "bias": False},
                "dtype": "float32", "threads": threads, "params": {}, "gflops": {"median": gflops},
                "library": library, "label": f"{variant} 128"}  # fmt: skip

    recs = [
        rec("cpu.gemm.00-numpy-blas", 1, 100.0, library=True),
        rec("cpu.gemm.00-numpy-blas", 2, 180.0, library=True),
        rec("cpu.gemm.01-naive", 1, 1.0),
        rec("cpu.gemm.02-loop-order", 1, 5.0),
        rec("cpu.gemm.03-cache-blocked", 1, 20.0),
        rec("cpu.gemm.05-multithreaded", 1, 90.0),
        rec("cpu.gemm.05-multithreaded", 2, 162.0),
    ]
    family_report.add_pct_of_library(recs)
    assert [round(r["pct_of_library"]) for r in recs] == [100, 100, 1, 5, 20, 90, 90]
    rows = family_report.table(recs)
    assert [row[2] for row in rows] == [1, 2, 1, 1, 1, 1, 2]
    assert len({(row[0], row[1], row[2]) for row in rows}) == len(rows)  # no two rows alike


def test_a_rung_on_a_unit_is_given_as_a_share_of_that_units_peak_at_its_thread_count():
    from rooflab import family_report

    def rec(variant, threads, rate, unit=None, family="bgemm"):
        return {
            "variant": variant,
            "family": family,
            "status": "ok",
            "threads": threads,
            "dtype": "uint16",
            "shape": {"M": 64},
            "params": {},
            "gflops": {"median": rate},
            "unit": unit,
        }  # fmt: skip (meta: top level)

    recs = [
        rec("cpu.lowprec.bf16-avx512", 1, 200.0, "bf16-avx512", "lowprec"),
        rec("cpu.lowprec.bf16-avx512", 2, 400.0, "bf16-avx512", "lowprec"),
        rec("cpu.bgemm.02-avx512-dpbf16ps", 1, 150.0, "bf16-avx512"),
        rec("cpu.bgemm.02-avx512-dpbf16ps", 2, 340.0, "bf16-avx512"),
        rec("cpu.bgemm.01-amx-tdpbf16ps", 1, 900.0, "amx-bf16"),  # its unit's peak did not run
    ]
    family_report.add_pct_of_library(recs)
    assert [r.get("pct_of_unit_peak") for r in recs] == [None, None, 75.0, 85.0, None]
    assert family_report.has_unit_peaks(recs) and not family_report.has_unit_peaks(recs[:2])
    assert [row[6] for row in family_report.table(recs)] == [None, None, 75.0, 85.0, None]
    assert family_report.rate(recs[0]) == (200.0, "GFLOP/s")
    assert family_report.rate(rec("cpu.lowprec.int8-vnni", 1, 900.0, "int8-vnni", "lowprec"))[1] == "GOPS"


def _report_inputs():
    """The issue's `rooflab report CEILINGS GEMM PLACED RUNTIME`: a ceilings run, a gemm run
    (clock on its records only, theoretical peaks stored at the nominal clock), a models placement
    and a `place --runtime` result whose ops are runtime nodes (no count, kind, impl or seconds)."""
    import copy
    import json

    from tests.test_new_user import CEILINGS, MODELS

    ceil = json.loads(CEILINGS.read_text())
    gemm = copy.deepcopy(ceil)
    cpu = gemm["machine"]["cpu"]
    cpu.pop("measured_ghz", None)
    cpu["theoretical"] = dict(cpu["theoretical"], clock_source="nominal clock (cpuinfo)")
    gemm.update(suite="gemm", ceilings=[], sweeps={"bandwidth": [], "intensity": []}, notes=[])
    gemm["records"] = [
        {"variant": v, "family": "gemm", "status": "ok", "shape": {"M": 128, "N": 128, "K": 128, "bias": False},
         "dtype": "float32", "threads": 1, "params": {}, "gflops": {"median": g}, "library": v.endswith("blas"),
         "work": {"flops": 4.2e6, "bytes": 196608}, "label": f"{v} 128", "clock_ghz": {"best_in_run": 4.192}}
        for v, g in (("cpu.gemm.00-numpy-blas", 100.0), ("cpu.gemm.01-naive", 1.0))
    ]  # fmt: skip
    runtime = copy.deepcopy(ceil)
    runtime.update(suite="runtime", ceilings_source=str(CEILINGS), records=[], sweeps={}, notes=[])
    runtime["ops_placed"] = [
        {"name": "conv1", "node": "conv1", "op_type": "Conv", "intensity": 20.0, "achieved_gflops": 50.0,
         "class": "compute-bound", "runtime_s": 1e-3, "total_time_s": 1e-3, "model": "onnxruntime", "threads": 2}
    ]  # fmt: skip
    return ceil, gemm, json.loads(MODELS.read_text()), runtime


@pytest.mark.slow  # four results drawn, a ceilings run's charts among them: ~9 s
def test_report_takes_every_result_kind_and_shows_placements_as_ops_on_their_machine():
    from rooflab import report

    ceil, gemm, placed, runtime = _report_inputs()
    page = report.build([ceil, gemm, placed, runtime])  # a runtime result stopped it: KeyError 'count'
    assert "<h2>Comparison</h2>" not in page  # a placement's ceilings are not a second machine
    assert page.count("<h2>Ceilings</h2>") == 1  # the place sections do not repeat the ceilings table
    assert "conv1" in page and "Conv" in page
    gemm_part = page.split("(kernel family)</h2>")[1].split("(ops placed)</h2>")[0]
    assert "measured 4.192 GHz" in gemm_part and "0.00 GHz" not in gemm_part
    assert "4.192" in gemm_part.split("theoretical")[1]  # peaks at the measured clock, not the nominal one
    assert "cpu.gemm.01-naive" in gemm_part and "1%" in gemm_part and "<img" in gemm_part


def test_compare_colours_follow_the_threshold_with_a_key_and_a_legend_without_twins(monkeypatch):
    import copy

    from rooflab import report

    ceil = _report_inputs()[0]
    other = copy.deepcopy(ceil)
    for c in other["ceilings"]:
        c["value"] *= 0.969  # inside the 5 % threshold: not red
    figs = []
    monkeypatch.setattr(report, "_fig_to_img", lambda fig, alt: figs.append(fig) or "<img>")
    html_ = report._compare_section([ceil, other, copy.deepcopy(ceil)])
    assert "num worse" not in html_ and "Colour key" in html_ and "within 5%" in html_
    labels = [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
    assert len(labels) == len(set(labels))


def test_a_rung_whose_unit_peak_moved_between_its_passes_is_flagged_and_read_against_the_faster():
    """unit_peak.around runs a unit's peak before and after its rungs: a neighbour that took the unit
    meanwhile slows a whole case evenly (no spread inside it shows), so a peak that moved more than
    PEAK_DRIFT flags that unit's rungs at that thread count, with the two figures."""
    from rooflab import family_report
    from rooflab.families.unit_peak import PEAK_DRIFT

    def rec(variant, threads, rate, unit, family="bgemm"):
        return {"variant": variant, "family": family, "status": "ok", "threads": threads, "dtype": "uint16",
                "shape": {"M": 64}, "params": {}, "gflops": {"median": rate}, "unit": unit}  # fmt: skip

    moved = 2000.0 * (1 + 2 * PEAK_DRIFT)
    recs = [
        rec("cpu.lowprec.amx-bf16", 1, 2000.0, "amx-bf16", "lowprec"),
        rec("cpu.lowprec.amx-bf16", 2, 4000.0, "amx-bf16", "lowprec"),
        rec("cpu.bgemm.01-amx-tdpbf16ps", 1, 1000.0, "amx-bf16"),
        rec("cpu.bgemm.01-amx-tdpbf16ps", 2, 2000.0, "amx-bf16"),
        rec("cpu.lowprec.amx-bf16", 1, moved, "amx-bf16", "lowprec"),  # after the rungs: moved
        rec("cpu.lowprec.amx-bf16", 2, 4000.0 * (1 + PEAK_DRIFT / 2), "amx-bf16", "lowprec"),  # within
    ]
    family_report.add_pct_of_library(recs)
    one, two = recs[2], recs[3]
    assert one["pct_of_unit_peak"] == pytest.approx(100 * 1000.0 / moved)
    assert one["noisy"] and "moved 20%" in one["noise_reasons"][0] and "2000, 2400" in one["noise_reasons"][0]
    assert not two.get("noisy") and two["pct_of_unit_peak"] == pytest.approx(100 * 2000.0 / 4200.0)
    assert [row[7] for row in family_report.table(recs)][2:4] == ["noisy", "ok"]


def test_the_gemm_families_run_each_units_peak_before_and_after_their_rungs():
    from rooflab.families import unit_peak
    from rooflab.registry import Case

    rungs = [Case("cpu.bgemm.01-amx-tdpbf16ps", size={"M": 32}, threads=t) for t in (1, 2)]
    got = unit_peak.around(["amx-bf16", "amx-bf16"], [1, 2], rungs)
    assert [(c.variant.rsplit(".", 1)[-1], c.threads, c.meta.get("peak_pass")) for c in got] == [
        ("amx-bf16", 1, "before the rungs"), ("amx-bf16", 2, "before the rungs"),
        ("01-amx-tdpbf16ps", 1, None), ("01-amx-tdpbf16ps", 2, None),
        ("amx-bf16", 1, unit_peak.AFTER), ("amx-bf16", 2, unit_peak.AFTER),
    ]  # fmt: skip
    assert unit_peak.around([], [1], rungs) == rungs  # no unit on this CPU: the rungs alone
    assert [c.meta["peak_pass"] for c in unit_peak.around(["amx-bf16"], [1], [])] == ["before the rungs"]
