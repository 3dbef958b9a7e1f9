"""Arguments of `rooflab llm` (kept here so cli.py gains two lines)."""

from __future__ import annotations

from ..results import RUNS_DIR


def add_parser(sub) -> None:
    p = sub.add_parser(
        "llm", help="an LLM from its config.json: prefill and decode per op on the measured roofline, tokens/s"
    )
    p.add_argument("config", help="a Hugging Face config.json (or its folder) or a bundled name, e.g. llama-2-7b")
    p.add_argument("--prompt", default="128", metavar="S", help="prefill length in tokens (default 128)")
    p.add_argument("--context", default="1024", metavar="L[,L...]", help="decode KV length(s) (default 1024)")
    p.add_argument("--batch", default="1", metavar="B[,B...]", help="batch size(s) (default 1)")
    p.add_argument("--dtype", default="float32", help="weights and activations: float32 (default), bfloat16, ...")
    p.add_argument(
        "--weights",
        default="fp32",
        metavar="fp32|int8|int4",
        help="weight storage: fp32 (default), or int8/int4 weight-only (block 32, fp32 scales and activations, "
        "onnxruntime's MatMulNBits layout); weight bytes are counted as stored and the GEMVs run the qgemm rungs",
    )
    p.add_argument("--ceilings", default=None, metavar="RESULT.json", help="ceilings to place on (default: newest)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--json", action="store_true", help="print the summary (parameter counts included) as JSON")
    p.add_argument("--out", default=RUNS_DIR, help=f"results directory (default: {RUNS_DIR}/)")
    p.add_argument("--quick", action="store_true", help="shorter timing budgets")
    p.add_argument("--no-own", action="store_true", help="time the library variant only (not rooflab's kernels)")
    p.add_argument("--no-measure", action="store_true", help="roofs only: predict every op, execute none")
    p.add_argument(
        "--runtime",
        default=None,
        metavar="NAME",
        help="also build the model with random weights in this runtime (onnxruntime: exported to ONNX; torch: "
        "transformers' from_config, no download), verify it and time prefill and decode (batch 1, first context) "
        "beside the prediction",
    )
    p.add_argument(
        "--grid",
        default=None,
        metavar="small|full",
        help="with --runtime: the check over a grid of cells (full: batch 1,4,16 x context 128,1024 x prompt "
        "32,512 x threads 1,all; small: batch 1,4, context 128, prompt 32, 1 thread), each measured and "
        "predicted; prints the table and the mean absolute error per runtime and phase",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write charts")
