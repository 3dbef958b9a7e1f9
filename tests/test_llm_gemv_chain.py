"""scripts/llm_gemv_chain.py: the decode GEMV chain runs every variant, verified, and a wrong GEMV stops it."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "llm_gemv_chain.py"


@pytest.fixture(scope="module")
def chain():
    spec = importlib.util.spec_from_file_location("llm_gemv_chain", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_shapes_are_every_layers_weight_gemvs(chain):
    s = chain.chain_shapes("smollm-135m", 2)
    assert [n for n, _, _ in s[:7]] == [f"L0.{p}_proj" for p in ("q", "k", "v", "o", "gate", "up", "down")]
    assert len(s) == 14 and s[5][1:] == (576, 1536) and s[6][1:] == (1536, 576)
    assert len(chain.chain_shapes("qwen2-0.5b", None)) == 24 * 7  # the LM head is left out


def test_a_wrong_gemv_anywhere_stops_the_script(chain):
    shapes = chain.chain_shapes("smollm-135m", 1)
    xs, Ws = chain.build(shapes)
    assert len({id(W) for W in Ws}) == len(Ws) and not np.shares_memory(Ws[0], Ws[1])
    ys = [xs[K] @ W for (_, K, _), W in zip(shapes, Ws)]
    chain.verify("numpy", ys, shapes, xs, Ws)  # right: passes
    ys[4] = ys[4].copy()
    ys[4][0, 7] *= 1.001  # one element of the fifth GEMV a little off
    with pytest.raises(SystemExit, match="L0.gate_proj"):
        chain.verify("numpy", ys, shapes, xs, Ws)


def test_runs_every_variant(chain, capsys):
    pytest.importorskip("onnxruntime")
    assert chain.main(["--model", "smollm-135m", "--layers", "1", "--rounds", "2", "--threads", "1", "--gap", "0"]) == 0
    out = capsys.readouterr().out
    for want in ("numpy", "onnxruntime", "own", "own/onnxruntime", "gate_proj"):
        assert want in out


def test_bad_arguments_exit_2(chain, capsys):
    assert chain.main(["--variants", "numpy,torch"]) == 2
    assert "torch" in capsys.readouterr().err
