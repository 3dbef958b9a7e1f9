"""Every CLI command, run on the same small inputs, writes the same fields as it did before the
commands moved into one module each (rooflab/commands/): the field names of each command's result
file (top level, config, and every kind of entry in its lists) and the kinds of files it writes
beside it, against tests/data/command_fields.json, which the code before the move recorded.

Only names are compared, not figures: a figure moves from run to run, a field that disappears (or
appears) is a change of behaviour. Fields that come and go with the machine or the noise (flags a
ceiling earns, notes, the numba cache's compile-ahead) are left out by name in VOLATILE, and a list's
entries are compared by the fields all of them have.

Record again after a deliberate change of a result's fields:
    ROOFLAB_RECORD_FIELDS=1 python -m pytest -q tests/test_commands_unchanged.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rooflab import cli

RECORD = Path(__file__).parent / "data" / "command_fields.json"
# flags and notes a ceiling or op earns from this run's noise or this machine's units, not from the command
VOLATILE = {
    "noisy", "moved", "implausible", "notes", "agreement", "clock_moved", "interval_note", "flags",
    "above_roof", "warning", "spread_note", "errors", "compile_ahead",
}  # fmt: skip
TINY_LLM = {
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64,
    "tie_word_embeddings": True,
}  # fmt: skip
OPS = [
    {"kind": "gemm", "shape": {"M": 8, "N": 16, "K": 32}, "name": "fc"},
    {"kind": "relu", "shape": {"numel": 4096}, "name": "act"},
    {"kind": "softmax", "shape": {"rows": 8, "cols": 64}, "name": "sm"},
]


def fields(data) -> dict:
    """Field names of a result: its keys, and for each list of dicts the keys every entry has (a flag
    only some entries earn, from the noise or the machine, is not a field of the command)."""
    if not isinstance(data, dict):
        return {}
    out = {"keys": sorted(k for k in data if k not in VOLATILE)}
    for k, v in data.items():
        if k in VOLATILE:
            continue
        if isinstance(v, dict) and k in ("config", "machine", "phases", "summary"):
            out[k] = sorted(x for x in v if x not in VOLATILE)
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            out[k] = sorted(set.intersection(*(set(d) for d in v)) - VOLATILE)
    return out


def written(folder: Path, before: set[Path]) -> list[str]:
    """Kinds of files a command wrote: the name after its timestamp (rooflab-place-cpu-<time>.ops.csv -> .ops.csv)."""
    new = sorted(set(folder.rglob("*")) - before)
    return sorted({p.name.split(".", 1)[1] if "." in p.name else p.name for p in new if p.is_file()})


def _run(argv, folder: Path) -> dict:
    before = set(folder.rglob("*")) if folder.exists() else set()
    rc = cli.main(argv)
    files = written(folder, before) if folder.exists() else []
    new = sorted(set(folder.rglob("*.json")) - before) if folder.exists() else []
    result = next((p for p in new if p.name.startswith("rooflab-")), None)
    return {"rc": rc, "files": files, "fields": fields(json.loads(result.read_text())) if result else {}}


@pytest.mark.slow  # on the shared quick run's ceilings
def test_every_command_writes_the_fields_it_wrote_before(quick_result, tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY_LLM))
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps(OPS))
    ceil = str(quick_result)
    out = tmp_path / "res"
    got = {
        "run (family)": _run(
            [
                "run",
                "--suite",
                "chase",
                "--quick",
                "--budget",
                "0.005",
                "--threads",
                "1",
                "--max-working-set",
                "1M",
                "--no-plot",
                "--out",
                str(out / "run"),
            ],
            out / "run",
        ),  # fmt: skip
        "run (ceilings)": {"rc": 0, "files": [], "fields": fields(json.loads(Path(ceil).read_text()))},
        "place OPS.json": _run(
            ["place", str(ops), "--ceilings", ceil, "--quick", "--threads", "1", "--out", str(out / "place")],
            out / "place",
        ),  # fmt: skip
        "llm --no-measure": _run(
            [
                "llm",
                str(cfg),
                "--no-measure",
                "--ceilings",
                ceil,
                "--prompt",
                "8",
                "--context",
                "32",
                "--out",
                str(out / "llm"),
            ],
            out / "llm",
        ),  # fmt: skip
        "plot": _run(["plot", ceil, "-o", str(out / "plot" / "x")], out / "plot"),
        "compare": _run(["compare", ceil, ceil], out / "compare"),
        "report": _run(["report", ceil, "-o", str(out / "report" / "r.html")], out / "report"),
    }
    capsys.readouterr()
    if os.environ.get("ROOFLAB_RECORD_FIELDS"):
        RECORD.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"recorded {RECORD}")
    want = json.loads(RECORD.read_text())
    for name in want:
        assert got[name] == want[name], name
