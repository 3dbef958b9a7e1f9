"""Result files: versioned JSON records, written atomically after every measurement.

Layout: ``<out>/<machine-id>/rooflab-<suite>-<device>-<UTC timestamp>.json``; plots are written next
to it with the same stem. A run that is interrupted keeps everything it finished (status
"interrupted"); a file whose schema_version is not ours is refused with a clear message.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path

from .errors import RooflabError

SCHEMA_VERSION = 2
# Versions this rooflab reads. 2 (rooflab 0.2): records written by the one driver carry ``library``
# and ``number`` (variant 0 = the library) and a verification ``tolerance`` kind; failed records keep
# their status and error with no figures. Every field of version 1 kept its name and meaning, so
# version-1 files are read as they are.
READS = (1, 2)
KIND = "rooflab-result"


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def atomic_write_json(path: Path, data: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=_default)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class ResultWriter:
    """Holds one run's result document and rewrites it atomically on every ``save``."""

    def __init__(self, out_dir: Path, machine: dict, suite: str, device: str, config: dict):
        stamp = utc_now().replace(":", "").replace("-", "")
        self.path = Path(out_dir) / machine["id"] / f"rooflab-{suite.replace(',', '+')}-{device}-{stamp}.json"
        self.data = {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "suite": suite,
            "device": device,
            "status": "running",
            "started": utc_now(),
            "finished": None,
            "config": config,
            "machine": machine,
            "ceilings": [],
            "sweeps": {"bandwidth": [], "intensity": []},
            "records": [],
            "errors": [],
            "notes": [],
        }

    def add_record(self, record: dict, sweep: str | None = None) -> None:
        self.data["records"].append(record)
        if sweep:
            self.data["sweeps"][sweep].append(_point(record))
        if record.get("status") == "failed":
            self.data["errors"].append(
                {"variant": record["variant"], "label": record.get("label"), "error": record.get("error")}
            )
        self.save()

    def add_error(self, where: str, message: str) -> None:
        self.data["errors"].append({"label": where, "error": message})
        self.save()

    def save(self) -> None:
        atomic_write_json(self.path, self.data)

    def finish(self, status: str = "complete") -> None:
        self.data["status"] = status
        self.data["finished"] = utc_now()
        self.save()


def _point(record: dict) -> dict:
    """The compact sweep point kept next to the full record (plots read these by field name)."""
    keep = ("variant", "label", "threads", "dtype", "working_set_bytes", "intensity", "kernel", "noisy", "status")
    p = {k: record.get(k) for k in keep if k in record}
    if record.get("gbps"):
        p["gbps"] = record["gbps"]
    if record.get("gflops"):
        p["gflops"] = record["gflops"]
    if record.get("work"):
        p["flops_per_byte"] = record["work"]["flops"] / record["work"]["bytes"] if record["work"]["bytes"] else None
    return p


def load(path) -> dict:
    """Read a result file, refusing anything that is not a rooflab result of this schema."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RooflabError(f"no such result file: {path}", "give the path of a rooflab-*.json file") from None
    except UnicodeDecodeError as e:
        raise RooflabError(
            f"{path} is not a text file (byte {e.start} is not UTF-8)", "give a result file written by `rooflab run`"
        ) from None
    except OSError as e:
        raise RooflabError(f"cannot read {path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RooflabError(
            f"{path} is not JSON (line {e.lineno}: {e.msg})", "give a result file written by `rooflab run`"
        ) from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise RooflabError(f"{path} is not a rooflab result file", "give a result file written by `rooflab run`")
    version = data.get("schema_version")
    if version not in READS:
        raise RooflabError(
            f"{path} has schema_version {version!r}; this rooflab reads versions {', '.join(map(str, READS))}",
            "re-run `rooflab run` with this version, or use the rooflab that wrote it",
        )
    return data


def previous_results(out_dir: Path, machine_id: str, suite: str, device: str, exclude: Path) -> list[Path]:
    d = Path(out_dir) / machine_id
    if not d.is_dir():
        return []
    files = sorted(d.glob(f"rooflab-{suite.replace(',', '+')}-{device}-*.json"))
    return [f for f in files if f.resolve() != Path(exclude).resolve()]


def require_writable(out: Path) -> None:
    """Refuse an output folder that cannot be written, before a run starts measuring."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".rooflab-write-check-"):
            pass
    except OSError as e:
        raise RooflabError(f"cannot write results to {out}: {e.strerror or e}", "pass a writable --out DIR") from None
