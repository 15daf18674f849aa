"""The handlers of the ONNX operators fnx runs (see ``fnx.onnx.graph``), one module per
family; importing this package registers them all."""
from . import control, elementwise, math, ml, nn, shape  # noqa: F401
