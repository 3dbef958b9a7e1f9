"""Issue 37: an interrupted ceilings run keeps the ceilings of the phases that finished (it kept 51
records and 0 ceilings), says so in its notes, is never a default for placement, and its charts say
it is partial (it was drawn as a finished roofline)."""

from __future__ import annotations

import glob
import json
import signal
import subprocess
import sys
import time

import pytest

from rooflab.charts.style import title


def test_a_partial_result_says_so_in_its_charts_titles():
    doc = {"machine": {"id": "m", "cpu": {"model": "CPU"}}, "started": "2026-12-07T04:00:00Z"}
    assert "INTERRUPTED" in title(dict(doc, status="interrupted"), "Empirical roofline")
    assert "only what finished" not in title(dict(doc, status="complete"), "Empirical roofline")


@pytest.mark.slow
def test_ctrl_c_after_the_peaks_keeps_their_ceilings_and_is_no_default(tmp_path):
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "rooflab", "run", "--quick", "--no-plot", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.monotonic()
    done = []
    while time.monotonic() - t0 < 240 and p.poll() is None:  # until the FMA peaks' phase has finished
        time.sleep(0.3)
        try:
            d = json.loads(open(glob.glob(str(out / "*" / "rooflab-ceilings-*.json"))[0]).read())
        except (IndexError, ValueError, OSError):
            continue
        done = [ph["name"] for ph in d.get("phases", {}).get("items", []) if not ph.get("interrupted")]
        if "FMA peaks" in done:
            break
    assert "FMA peaks" in done, done
    p.send_signal(signal.SIGINT)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 130, text[-2000:]
    (f,) = glob.glob(str(out / "*" / "rooflab-ceilings-*.json"))
    d = json.loads(open(f).read())
    assert d["status"] == "interrupted", text[-2000:]
    kinds = {(c["kind"], c.get("dtype")) for c in d["ceilings"]}
    assert ("compute", "float64") in kinds and ("compute", "float32") in kinds, (kinds, text[-2000:])
    assert any(c["kind"] == "latency" for c in d["ceilings"])  # dispatch latency finished first
    assert any("interrupted: the ceilings are those of the phases that finished" in n for n in d["notes"])

    from rooflab.ceilings_file import find_ceilings
    from rooflab.errors import RooflabError

    with pytest.raises(RooflabError, match="it is interrupted|lacks"):  # never the default
        find_ceilings(out, d["machine"]["id"], "cpu", None)


def test_ctrl_c_inside_a_compiled_function_is_an_interrupt_not_a_traceback(monkeypatch, capsys):
    """Found by the Ctrl-C test (1 run in 10): a SIGINT inside a numba parallel function (the clock
    probe's chains) surfaced as SystemError("... returned a result with an exception set") caused by
    the KeyboardInterrupt: exit 1 and a traceback, the result left 'running'."""
    from rooflab import cli
    from rooflab.commands import COMMANDS
    from rooflab.errors import interrupted

    def wrapped():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as k:
            raise SystemError(
                "CPUDispatcher(<function add_chain_probes>) returned a result with an exception set"
            ) from k

    with pytest.raises(SystemError) as got:
        wrapped()
    assert interrupted(got.value) and interrupted(KeyboardInterrupt())
    assert not interrupted(SystemError("a real one")) and not interrupted(ValueError("x"))
    monkeypatch.setattr(COMMANDS["info"], "main", lambda args: wrapped())
    assert cli.main(["info"]) == 130
    assert "interrupted" in capsys.readouterr().err
