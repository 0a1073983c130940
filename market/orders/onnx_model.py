"""The buyer's linear model as an ONNX graph (``GET /v1/orders/{id}/model.onnx``).

Every orderable learner publishes a linear predictor in raw feature units
(:func:`market.pipeline.results.model_json`): ``score = X·coefficients + intercept``.
The graph is that post-processing of the JSON model, nothing more:

- input ``X``: ``double[N, d]``, the raw feature values in ``feature_names`` order,
  clipped to the market's public bounds (as the JSON model's ``input`` says; the
  graph does not clip and has no rule for missing entries);
- classification learners (the model lists ``classes``): outputs ``score`` (``N×1``),
  ``probability = σ(score)`` (``P(y = +1)`` under the logistic model) and ``label``
  (``+1`` where ``score ≥ 0``, else ``-1``: the JSON model's ``decision``);
- regression and quantile learners: output ``prediction`` (``N×1``), the JSON model's
  ``coefficients·x + intercept`` (for ``onebit_quantile`` the conditional quantile).

Tensors are double precision, so predictions agree with the JSON model's to float64
rounding (raw-unit coefficients can span many orders of magnitude; float32 would not).
"""

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["OPSET", "model_to_onnx"]

OPSET = 17
"""ONNX operator set of the exported graphs (runtimes since 2022 load it)."""


def model_to_onnx(model: dict[str, Any], *, name: str) -> bytes:
    """Serialise the JSON model's linear predictor as an ONNX ``ModelProto``.

    Raises
    ------
    ValueError
        The model has no flat list of numeric ``coefficients`` (not a linear model).
    """
    coef = model.get("coefficients")
    if (
        not isinstance(coef, list)
        or not coef
        or not all(isinstance(v, int | float) for v in coef)
    ):
        raise ValueError(
            "coefficients: the model has no linear predictor to export as ONNX"
        )
    d = len(coef)
    w = np.asarray(coef, dtype=np.float64).reshape(d, 1)
    b = np.asarray([float(model.get("intercept") or 0.0)], dtype=np.float64)
    classify = bool(model.get("classes"))
    inits = [numpy_helper.from_array(w, "coefficients"),
             numpy_helper.from_array(b, "intercept")]  # fmt: skip
    out = "score" if classify else "prediction"
    nodes = [
        helper.make_node("MatMul", ["X", "coefficients"], ["xw"]),
        helper.make_node("Add", ["xw", "intercept"], [out]),
    ]
    outputs = [helper.make_tensor_value_info(out, TensorProto.DOUBLE, ["N", 1])]
    if classify:
        inits += [
            numpy_helper.from_array(np.zeros(1, np.float64), "zero"),
            numpy_helper.from_array(np.ones(1, np.float64), "plus_one"),
            numpy_helper.from_array(-np.ones(1, np.float64), "minus_one"),
        ]
        nodes += [
            helper.make_node("Sigmoid", ["score"], ["probability"]),
            helper.make_node("GreaterOrEqual", ["score", "zero"], ["positive"]),
            helper.make_node("Where", ["positive", "plus_one", "minus_one"], ["label"]),
        ]
        outputs += [
            helper.make_tensor_value_info("probability", TensorProto.DOUBLE, ["N", 1]),
            helper.make_tensor_value_info("label", TensorProto.DOUBLE, ["N", 1]),
        ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, ["N", d])],
        outputs,
        initializer=inits,
        doc_string=(
            "X: raw feature values in feature_names order, clipped to the market's "
            "public bounds"
        ),
    )
    proto = helper.make_model(
        graph,
        producer_name="privmarket",
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    proto.ir_version = 8  # readable by onnxruntime >= 1.10
    meta = {
        "learner": str(model.get("learner", "")),
        "feature_names": ",".join(str(f) for f in model.get("feature_names", [])),
        "guarantee": str((model.get("privacy") or {}).get("guarantee", "")),
    }
    helper.set_model_props(proto, meta)
    onnx.checker.check_model(proto)
    return bytes(proto.SerializeToString())
