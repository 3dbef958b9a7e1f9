"""Result files: versioned JSON records, written atomically after every measurement (on one line
while the run goes on, indented once it has ended).

Layout: ``<out>/<machine-id>/rooflab-<suite>-<device>-<UTC timestamp>.json``; plots are written next
to it with the same stem. A run that is interrupted keeps everything it finished (status
"interrupted"); a run killed outright (out of memory, power cut) cannot write its end, so the file
carries its pid, host and a heartbeat, and ``load`` reports it as "died". A file whose
schema_version is not ours is refused with a clear message.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from .errors import RooflabError

SCHEMA_VERSION = 2
# Versions this rooflab reads. 2 (rooflab 0.2): records written by the one driver carry ``library``
# and ``number`` (variant 0 = the library) and a verification ``tolerance`` kind; failed records keep
# their status and error with no figures. Every field of version 1 kept its name and meaning, so
# version-1 files are read as they are.
READS = (1, 2)
KIND = "rooflab-result"

# where a user's runs go by default: never into the repository's own committed results
# (results/<machine>/), so `compare`, "newest ceilings" and the site never mix the two
RUNS_DIR = "results/runs"


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def readable_mode(path) -> None:
    """The mode an ordinary file gets (0666 less the umask): a file written through mkstemp is
    0600, which left result JSON and exported ONNX files unreadable to others beside 0644 PNGs."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def atomic_write_json(path: Path, data: dict, compact: bool = False) -> None:
    """``data`` as JSON at ``path``, whole or not at all (a temporary file, synced, then renamed).
    ``compact``: one line, through json's C encoder (~3x faster than the indented form, which only
    the pure-Python encoder writes); for the checkpoints of a run still going."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        text = (
            json.dumps(data, separators=(",", ":"), default=_default)
            if compact
            else json.dumps(data, indent=1, default=_default)
        )
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        readable_mode(tmp)
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
            "pid": os.getpid(),  # with host and heartbeat: a reader tells a run that died (``died``)
            "host": socket.gethostname(),
            "heartbeat": utc_now(),
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
        """Rewritten whole after every record: compact while the run goes on (a quick run saves
        ~240 times, and the indented form took ~12 s of it on a 2-core VM), indented once it ended."""
        self.data["heartbeat"] = utc_now()
        atomic_write_json(self.path, self.data, compact=self.data["status"] == "running")

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


STALE_S = 3600  # a running result not saved for this long (another host's run) is taken as died


def died(data: dict, now: float | None = None) -> str | None:
    """Why a result that still says ``running`` belongs to a run that is gone, or None: its process
    is not alive on this host, or (written on another host) its heartbeat is over an hour old.
    A run killed by the OOM killer or a power cut never writes its end: this is how it shows."""
    if data.get("status") != "running":
        return None
    pid, host = data.get("pid"), data.get("host")
    if pid and host == socket.gethostname():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return f"its process {pid} on {host} is gone"
        except (PermissionError, OverflowError, ValueError):
            pass
        return None
    beat = data.get("heartbeat") or data.get("started")
    if not beat:
        return None
    try:
        t = _dt.datetime.fromisoformat(beat.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    age = (now if now is not None else time.time()) - t
    return f"no heartbeat for {age / 3600:.1f} h" if age > STALE_S else None


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
    why = died(data)
    if why:  # the file stays as written; readers see the run for what it is
        data["status"], data["died"] = "died", why
        print(f"note: {path} is from a run that died ({why}); its finished parts are shown", file=sys.stderr)
    return data


def run_clock(data: dict) -> tuple[float | None, str]:
    """The one clock of a run and what it is: the best running clock probed in the run (probes
    before and after every measurement, the FMA kernels' included: a neighbour makes a probe read
    low, never high). A ceilings run stores it (machine.cpu.measured_ghz); a family run has it on
    its records. (None, why) when the run probed no clock."""
    cpu = (data.get("machine") or {}).get("cpu") or {}
    if cpu.get("measured_ghz"):
        return float(cpu["measured_ghz"]), "best running clock probed in the run (FMA kernels included)"
    best = [
        (r.get("clock_ghz") or {}).get("best_in_run")
        for r in data.get("records", [])
        if (r.get("clock_ghz") or {}).get("best_in_run")
    ]
    if best:
        return float(max(best)), "best running clock probed around the run's measurements"
    return None, "no clock probed in this run"


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
