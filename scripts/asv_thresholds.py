"""asv's regression view with rooflab's intervals: write asv.conf.json's ``regressions_thresholds``.

Each asv benchmark entry that measures a ceiling (the FMA and low-precision peaks, the stream
bandwidth at each size, the dispatch paths) gets the half-width of that ceiling's interval from the
newest ceilings run in each results folder given (rooflab.intervals.asv_thresholds; the largest over
the folders, at least 5 %); every other benchmark keeps 10 %. asv then calls a step inside a
ceiling's interval no regression, as ``rooflab compare`` does.

    python scripts/asv_thresholds.py results/intel-xeon-2c results/amd-epyc-2c            # print
    python scripts/asv_thresholds.py results/intel-xeon-2c --write asv.conf.json          # and write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rooflab.intervals import asv_thresholds
from rooflab.results import load

LINE = re.compile(r'^(\s*)"regressions_thresholds"\s*:.*?(,?)\s*$', re.M)


def newest(folder: Path) -> dict | None:
    for p in sorted(folder.glob("rooflab-ceilings-cpu-*.json"), reverse=True):
        try:
            d = load(p)
        except Exception:  # an unreadable or foreign file: the next one
            continue
        if str(d.get("status", "")).startswith("complete") and d.get("ceilings"):
            return d
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="results/<machine> folders with ceilings runs")
    ap.add_argument("--write", type=Path, help="the asv.conf.json whose regressions_thresholds line is replaced")
    a = ap.parse_args(argv)
    docs = []
    for f in a.folders:
        if not f.is_dir():
            print(f"asv_thresholds: error: {f} is not a folder", file=sys.stderr)
            return 2
        d = newest(f)
        if d is None:
            print(f"asv_thresholds: error: no finished ceilings run in {f}", file=sys.stderr)
            return 2
        docs.append(d)
    th = asv_thresholds(docs)
    for regex, h in th.items():
        print(f"{h:6.3f}  {regex[:110]}")
    if a.write:
        try:
            text = a.write.read_text()
        except OSError as e:
            print(f"asv_thresholds: error: cannot read {a.write}: {e.strerror}", file=sys.stderr)
            return 2
        if not LINE.search(text):
            print(f"asv_thresholds: error: {a.write} has no regressions_thresholds line", file=sys.stderr)
            return 2
        new = LINE.sub(lambda m: f'{m.group(1)}"regressions_thresholds": {json.dumps(th)}{m.group(2)}', text, count=1)
        try:
            a.write.write_text(new)
        except OSError as e:
            print(f"asv_thresholds: error: cannot write {a.write}: {e.strerror}", file=sys.stderr)
            return 2
        print(f"wrote {len(th)} thresholds into {a.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
