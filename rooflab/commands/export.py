"""`rooflab export MODEL -o MODEL.onnx`: a catalog network (resnet50, mobilenetv2, bert-base,
gpt2-decode) or an LLM config as an ONNX graph with random weights, quantized on request with
onnxruntime's own tools."""

from __future__ import annotations

from pathlib import Path

HELP = "write a catalog network as an ONNX graph with random weights"


def add_parser(sub) -> None:
    ex = sub.add_parser("export", help=HELP)
    ex.add_argument("model", help="resnet50, mobilenetv2, bert-base or gpt2-decode")
    ex.add_argument("-o", "--output", required=True, metavar="MODEL.onnx")
    ex.add_argument("--batch", type=int, default=None, help="batch size (default 1)")
    ex.add_argument("--seq", type=int, default=None, help="bert-base: sequence length (default 128)")
    ex.add_argument("--cache", type=int, default=None, help="gpt2-decode: KV cache positions (default 1024)")
    ex.add_argument(
        "--quantize",
        default=None,
        metavar="SCHEME",
        help="quantize with onnxruntime's tools: static (QDQ, CNNs), static-qoperator, dynamic (INT8 MatMuls), "
        "int4 or int8w (MatMulNBits weight-only)",
    )


def main(args) -> int:
    from ..models.export import ALIASES, EXPORTS, export
    from ..models.llm import export as llm_export

    catalog_name = ALIASES.get(str(args.model).lower(), str(args.model).lower())
    # an LLM config (bundled name or config.json); the catalog's networks first (gpt2 = gpt2-decode)
    is_llm = catalog_name not in EXPORTS and llm_export.exportable(args.model)
    if is_llm:
        export = llm_export.export
    if args.quantize:
        from ..models.export_quant import export_quantized

        out = export_quantized(
            export, args.model, args.output, args.quantize, is_llm, batch=args.batch, seq=args.seq, cache=args.cache
        )
    else:
        out = export(args.model, args.output, batch=args.batch, seq=args.seq, cache=args.cache)
    data = Path(str(out) + ".data")
    size = out.stat().st_size + (data.stat().st_size if data.exists() else 0)
    print(f"{out} ({size / 1e6:.1f} MB{', weights in ' + data.name if data.exists() else ''})")
    return 0
