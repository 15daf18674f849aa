"""Control flow, recurrent and attention ONNX operators: If, Loop and Scan onto
``lax.cond``/``while_loop``/``scan``; RNN, GRU and LSTM; sequences and optionals;
Attention and rotary embeddings."""
from __future__ import annotations
