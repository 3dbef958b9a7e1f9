"""Quantized graphs of rooflab's exports, made by onnxruntime's own quantization tools
(`rooflab export MODEL --quantize SCHEME -o MODEL.onnx`; optional extra `rooflab[onnx]`).

  static            QDQ format (QuantizeLinear/DequantizeLinear around each op; onnxruntime fuses
                    them into QLinearConv, QLinearAdd ... when it loads the graph): u8 activations,
                    s8 weights, one scale per tensor, MinMax ranges from CALIBRATION random N(0, 1)
                    inputs, after onnxruntime's pre-processing (batch norm folded into the conv, as
                    its quantizer expects). CNNs: resnet50, mobilenetv2.
  static-qoperator  the same in QOperator format (QLinearConv, QLinearAdd, QGemm ... written out).
  dynamic           quantize_dynamic: s8 weights of every MatMul (and the embedding tables), the
                    activations quantized at run time (DynamicQuantizeLinear -> MatMulInteger ->
                    Cast -> Mul): transformers (bert-base, gpt2-decode, an LLM config).
  int4, int8w       weight-only MatMulNBits (block 32, symmetric, fp32 activations and accumulation;
                    ort.quantize): transformers and LLMs.

The values are random, so the calibrated scales mean nothing numerically; the graph, the op types
and the bytes are the ones a quantized deployment runs, and that is what placement measures.
Napkin: MobileNetV2's 3.5 M weights and activations shrink 4x in QDQ (173 MB of fp32 op traffic
counted at batch 1 -> 18 MB), its 0.6 GFLOP stay.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from ..errors import RooflabError

SCHEMES = ("static", "static-qoperator", "dynamic", "int4", "int8w")
CNNS = ("resnet50", "mobilenetv2")
CALIBRATION = 4  # random inputs the static ranges are taken from


def check(scheme: str, name: str, is_llm: bool) -> None:
    """Refuse a scheme the model cannot take, before anything is built."""
    if scheme not in SCHEMES:
        raise RooflabError(f"--quantize {scheme!r} is not a scheme rooflab makes", f"use one of: {', '.join(SCHEMES)}")
    cnn = not is_llm and name in CNNS
    if scheme.startswith("static") and not cnn:
        raise RooflabError(
            f"--quantize {scheme} is for the CNNs ({', '.join(CNNS)}), not {name}",
            "transformers: --quantize dynamic, int4 or int8w",
        )
    if not scheme.startswith("static") and cnn:
        raise RooflabError(
            f"--quantize {scheme} quantizes MatMul weights; {name} is convolutions",
            "use --quantize static (or static-qoperator)",
        )


def _ort_quantization():
    try:
        from onnxruntime import quantization as q
    except ImportError as e:
        raise RooflabError(
            f"onnxruntime's quantization tools cannot be imported ({e})", "pip install 'rooflab[onnx]'"
        ) from None
    logging.getLogger("onnxruntime.quantization").setLevel(logging.ERROR)
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # its "please pre-process" lines
    return q


class _RandomInputs:
    """CALIBRATION sets of N(0, 1) float inputs (the CNNs have one input of fixed shape)."""

    def __init__(self, model_path: Path):
        import onnx

        m = onnx.load(str(model_path), load_external_data=False)
        self.inputs = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input]
        self.n = 0

    def get_next(self):
        if self.n >= CALIBRATION:
            return None
        self.n += 1
        rng = np.random.default_rng(self.n)
        return {name: rng.standard_normal(dims).astype(np.float32) for name, dims in self.inputs}

    def rewind(self):
        self.n = 0


def quantize(fp32: Path, out: Path, scheme: str) -> None:
    """Write ``out`` (and its .data where the weights are external) from the fp32 graph ``fp32``."""
    q = _ort_quantization()
    if scheme in ("int4", "int8w"):
        from .runtimes.ort import quantize as nbits

        made = nbits(fp32, 4 if scheme == "int4" else 8)  # written beside fp32, fp32 removed
        os.replace(made, out)
        if Path(str(made) + ".data").exists():
            os.replace(str(made) + ".data", str(out) + ".data")
            _relink(out, Path(str(made) + ".data").name, Path(str(out) + ".data").name)
        return
    if scheme == "dynamic":
        q.quantize_dynamic(str(fp32), str(out), weight_type=q.QuantType.QInt8)
        return
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = fp32.with_name(fp32.stem + ".pre.onnx")
    try:
        quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
        reader = _RandomInputs(pre)
        Reader = type("Reader", (q.CalibrationDataReader,), {"get_next": lambda s: reader.get_next()})
        q.quantize_static(
            str(pre),
            str(out),
            Reader(),
            quant_format=q.QuantFormat.QDQ if scheme == "static" else q.QuantFormat.QOperator,
            activation_type=q.QuantType.QUInt8,
            weight_type=q.QuantType.QInt8,
            calibrate_method=q.CalibrationMethod.MinMax,
        )
    finally:
        pre.unlink(missing_ok=True)


def _relink(path: Path, old: str, new: str) -> None:
    """Point a graph's external-data references from file ``old`` to ``new`` (after a rename)."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location" and e.value == old:
                e.value = new
    onnx.save(m, str(path))


def export_quantized(export, model: str, path, scheme: str, is_llm: bool, **sizes) -> Path:
    """``export`` (export.export or llm.export.export) at fp32, then quantized with ``scheme``: the
    output (and its .data) written whole or not at all."""
    import tempfile

    from .export import canonical

    path = Path(path)
    check(scheme, model if is_llm else canonical(model), is_llm)
    if path.suffix.lower() != ".onnx":
        raise RooflabError(f"{path}: the output must be an .onnx file", f"use -o {path.with_suffix('.onnx').name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    except OSError as e:
        raise RooflabError(f"cannot write {path}: {e.strerror or e}", "pass a writable -o FILE") from None
    try:
        fp32 = export(model, work / "fp32.onnx", **sizes)
        out = work / path.name
        quantize(fp32, out, scheme)
        from ..results import readable_mode

        data = Path(str(out) + ".data")
        for f in (out, data):
            if f.exists():
                readable_mode(f)
        if data.exists():
            os.replace(data, str(path) + ".data")
        os.replace(out, path)
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return path
