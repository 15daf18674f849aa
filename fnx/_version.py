"""fnx's version (one place; ``fnx.__version__``, the ONNX exporter's producer version and
``print_environment_info`` read it)."""
__version__ = "0.1.0"
