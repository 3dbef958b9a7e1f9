"""What the asv suite measures (benchmarks/ reads these).

APPEND ONLY: asv keys results by parameter value, so removing or changing an entry orphans that
benchmark's history across commits.
"""

BENCH_PARAMS = {
    "stream_kernels": ["read", "copy", "triad", "update"],
    "stream_bytes": [32 << 10, 1 << 20, 64 << 20, 512 << 20],
    "stream_bytes_quick": [32 << 10, 1 << 20, 64 << 20],
    "fma_dtypes": ["float64", "float32"],
    "fma_config": (64, 8),
    "intensity_K_passes": [(1, 1), (8, 1), (32, 4), (32, 64)],
    "model_ops": [
        ("bert-base", "layer0.intermediate (FFN1)"),
        ("bert-base", "layer0.softmax"),
        ("bert-base", "layer0.attention.LayerNorm"),
        ("gpt2-decode", "h0.mlp.c_fc"),
        ("resnet50", "layer1.0.conv2"),
    ],
    "gpu_stream_bytes": [256 << 20, 2 << 30],
    # issue 13: the best variant of each conv algorithm on two ResNet-50 3x3 layers (batch 1,
    # names from rooflab.families.conv.resnet50_3x3_targets), 1 thread
    "conv_layers": ["resnet50-b1 3x3 64@56x56", "resnet50-b1 3x3 256@14x14"],
    "conv_algorithms": [
        "cpu.conv.00-im2col-blas",
        "cpu.conv.02-direct-blocked-simd",
        "cpu.conv.06-winograd-f4x4-3x3",
        "cpu.conv.07-fft",
    ],
    # the suite's two intensity-sweep configurations (suite_ceilings.intensity_configs, in order)
    "intensity_configs": ["1-stream-L1-blocks", "8-streams-L2-blocks"],
    # the low-precision peaks (rooflab.families.lowprec), appended as units were added
    "lowprec_units": ["int8-avx2", "int8-vnni", "bf16-avx512", "fp16-avx512", "amx-bf16", "amx-int8"],
}
