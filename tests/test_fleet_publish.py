"""The fleet page (`rooflab report FLEET_DIR`) and `rooflab publish RESULTS_DIR -o SITE` on recorded
result files: a fleet made of a real result's copies (one node 7 % slow on DRAM) and a real
machine result."""

import json
import re
import shutil
from pathlib import Path

import pytest

from rooflab import cli
from rooflab.fleet import store

from .test_fleet_diagnose import DRAM, REAL, node


@pytest.fixture(scope="module")
def real():
    doc = json.loads(REAL.read_text())
    doc["records"], doc["sweeps"] = [], {"bandwidth": [], "intensity": []}
    return doc


def make_fleet(real, folder: Path) -> Path:
    m = store.new_manifest("ray", {"suite": "ceilings", "device": "cpu", "nodes": "all"}, "head:6379")
    for i, j in enumerate([-0.004, -0.002, 0.0, 0.002, 0.004]):
        node(real, folder / "nodes", f"n{i}", jitter=j)
    node(real, folder / "nodes", "slow", scale={DRAM: 0.93})
    for f in sorted((folder / "nodes").glob("*.json")):
        m["nodes"][f.stem] = {"node_id": f.stem, "status": "ok", "file": f"nodes/{f.name}", "sku_key": "k"}
    m["nodes"]["gone"] = {"node_id": "gone", "status": "died", "reason": "NodeDiedError: raylet died", "file": None}
    store.save_manifest(folder, m)
    return folder


def images(text: str) -> list[str]:
    return re.findall(r"<img [^>]*src=\"data:image/png;base64,", text)


def test_fleet_page_marks_the_slow_node(real, tmp_path, capsys):
    fleet = make_fleet(real, tmp_path / "fleet")
    out = tmp_path / "fleet.html"
    assert cli.main(["report", str(fleet), "-o", str(out)]) == 0
    page = out.read_text()
    assert "1 node(s) flagged" in page
    assert "NodeDiedError: raylet died" in page  # the node that died, with its reason
    row = re.search(r"<td>slow</td><td>DRAM triad bandwidth, 2 threads</td>.*?</tr>", page).group(0)
    assert "6.9 % below baseline" in row and "outlier in its SKU" in row  # baseline: the fleet median
    # the distribution chart of the SKU and the slow node's roofline over its SKU's
    assert len(images(page)) == 2 and "roofline of slow" in page
    assert "http://" not in page and "https://" not in page


@pytest.mark.slow
def test_publish_builds_an_offline_site(real, tmp_path, capsys):
    root = tmp_path / "results"
    (root / "intel-xeon-2c").mkdir(parents=True)
    shutil.copy(REAL, root / "intel-xeon-2c" / REAL.name)
    (root / "intel-xeon-2c" / "rooflab-broken-cpu-1.json").write_text("{not json")
    make_fleet(real, root / "fleets" / "rack1")
    (root / "html").mkdir()
    (root / "html" / "index.html").write_text("<html><body>asv</body></html>")
    site = tmp_path / "site"
    assert cli.main(["publish", str(root), "-o", str(site)]) == 0
    assert "1 machine(s), 1 fleet(s), asv history, 1 file(s) skipped" in capsys.readouterr().out
    index = (site / "index.html").read_text()
    for href in re.findall(r"href='([^']+)'", index):
        assert (site / href).is_file(), href  # every link resolves inside the site: opens offline
    assert "fleets-rack1.html" in index and "asv/index.html" in index and "is not JSON" in index
    machine = site / "machines" / "intel-xeon-2c"
    page = (machine / REAL.with_suffix(".html").name).read_text()
    assert len(images(page)) >= 2  # the roofline and the bandwidth staircase, inline
    for f in site.rglob("*.html"):
        text = f.read_text()
        assert not re.search(r"(src|href)=['\"]https?://", text), f
    assert "1 node(s) flagged" in (site / "fleets" / "fleets-rack1.html").read_text()
